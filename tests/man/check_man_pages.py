#!/usr/bin/env python3
"""The man pages (docs/man) against the code, both ways: every name the code defines is documented,
and every documented name is one the code defines.

    check_man_pages.py --lists LISTS_EXE --autopar AUTOPAR --autopard AUTOPARD --man DIR --etc DIR

What the code defines comes from the code itself: autopar_man_lists (tests/man/man_lists.cpp: the
job option table, the plugstack and autopard.conf keys, the task variables, the launcher's options
and variables), `autopar --help` (the subcommand table), each `autopar COMMAND --help` and
`autopard --help`. What a page documents is each `.TP` entry's tag (the first word of the line
after `.TP`, roff escapes removed) under a given `.SH` section (and `.SS` subsection). The example
files etc/plugstack.conf.d/autopar.conf and etc/autopard.conf, which document the keys too, are
checked against the same lists. Prints one line per difference and exits 1 when there is any.
"""
import argparse
import os
import re
import subprocess
import sys


def unroff(text):
    """The text of a roff line's arguments: fonts, escapes and quotes removed."""
    text = re.sub(r'\\f(\[[^]]*\]|\(..|.)', '', text)
    text = re.sub(r'\\\((aq|dq|em|en|bu)', lambda m: {'aq': "'", 'dq': '"'}.get(m.group(1), ''), text)
    text = text.replace('\\-', '-').replace('\\e', '\\').replace('\\&', '').replace('\\|', '')
    text = text.replace('\\c', '')
    return text


def macro_words(line):
    """A macro line's arguments, roff-quoted arguments kept whole."""
    return [w[1:-1] if w.startswith('"') else w for w in re.findall(r'"[^"]*"|\S+', line)][1:]


def tag_name(line):
    """The name a .TP tag documents: `.BR \\-\\-requeue\\-on\\-failure [= N ]` -> --requeue-on-failure,
    `.BI "socket = " PATH` -> socket, `.B RANK` -> RANK."""
    if line.startswith('.'):
        macro = line.split()[0]
        words = macro_words(line)
        # Alternating-font macros (.BR, .BI, ...) join their arguments without spaces; .B/.I keep them.
        text = ('' if len(macro) == 3 else ' ').join(words)
    else:
        text = line
    m = re.match(r'-{0,2}[A-Za-z0-9][A-Za-z0-9_.-]*', unroff(text).strip())
    return m.group(0) if m else None


def tags(page):
    """{(section, subsection): [names]} for every .TP entry of a page."""
    out = {}
    section = subsection = None
    lines = open(page, encoding='utf-8').read().split('\n')
    for i, line in enumerate(lines):
        if line.startswith('.SH'):
            section, subsection = ' '.join(macro_words(line)), None
        elif line.startswith('.SS'):
            subsection = unroff(' '.join(macro_words(line)))
        elif line.startswith('.TP') and i + 1 < len(lines):
            name = tag_name(lines[i + 1])
            if name:
                out.setdefault((section, subsection), []).append(name)
    return out


def in_section(page_tags, section, subsection=None):
    names = []
    for (sec, sub), found in page_tags.items():
        if sec == section and (subsection is None or sub == subsection):
            names += found
    return names


def run(argv):
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f'check_man_pages: {" ".join(argv)}: exit {result.returncode}: {result.stderr}')
    return result.stdout


def option_names(text):
    return set(re.findall(r'--[a-z][a-z-]*[a-z]', text))


def help_options(text):
    """The options a usage text declares: the --names in its synopsis (the `usage:` line and the
    lines continuing it, which start with `[` or `autopar `, up to a run of spaces before a
    description), on an `options: ...` line, and in the option column of the list under a bare
    `options:` header (Boost's). Mentions in the prose (`--heartbeat-timeout`, another command's
    `--calibration`) are not declarations."""
    found = set()
    in_usage = in_list = False
    for line in text.split('\n'):
        s = line.strip()
        in_usage = s.startswith('usage:') or (in_usage and s.startswith(('[', 'autopar ')))
        if in_usage:
            found |= option_names(re.split(r'\s{3,}', s)[0])
        elif s == 'options:':
            in_list = True
        elif s.startswith('options:'):
            found |= option_names(s.split('(')[0])
        elif in_list and s.startswith('-'):
            found |= option_names(re.split(r'\s{2,}', s)[0])
        elif not s:
            in_list = False
    found.discard('--help')
    return found


def etc_keys(path, pattern):
    keys = set()
    for line in open(path, encoding='utf-8'):
        m = re.match(pattern, line)
        if m:
            keys.add(m.group(1))
    return keys


def main():
    ap = argparse.ArgumentParser()
    for name in ('lists', 'autopar', 'autopard', 'man', 'etc'):
        ap.add_argument('--' + name, required=True)
    args = ap.parse_args()

    code = {}
    for line in run([args.lists]).splitlines():
        kind, name = line.split(' ', 1)
        code.setdefault(kind, set()).add(name)

    # The subcommands: `autopar --help` prints its table ("  NAME  summary" after "commands:").
    top = run([args.autopar, '--help'])
    commands = re.findall(r'^  ([a-z][a-z-]*) ', top.split('commands:', 1)[1], re.M)
    env = dict(os.environ, AUTOPAR_SOCKET='/nonexistent/autopard.sock')

    failures = []

    def compare(what, in_code, documented, where):
        in_code, documented = set(in_code), set(documented)
        for name in sorted(in_code - documented):
            failures.append(f'{where}: {what} {name} is in the code but not documented')
        for name in sorted(documented - in_code):
            failures.append(f'{where}: {what} {name} is documented but not in the code')

    def page(name):
        return os.path.join(args.man, name)

    # autopar(1): one `.SS "autopar COMMAND [SUB]"` per command under COMMANDS, its options as .TP.
    autopar = tags(page('autopar.1'))
    documented_commands = {}
    for (sec, sub), names in autopar.items():
        if sec == 'COMMANDS' and sub:
            documented_commands.setdefault(sub.split()[1], set()).update(names)
    sections = open(page('autopar.1'), encoding='utf-8').read()
    for sub in re.findall(r'^\.SS "autopar ([a-z-]+)', sections, re.M):
        documented_commands.setdefault(sub, set())
    compare('command', commands, documented_commands, 'autopar.1')
    for command in commands:
        declared = help_options(subprocess.run([args.autopar, command, '--help'], env=env,
                                               capture_output=True, text=True).stdout)
        if not declared:
            failures.append(f'autopar {command} --help: no options found in its usage')
        compare('option', declared, documented_commands.get(command, set()),
                f'autopar.1 (autopar {command})')

    # autopar-launch(1)
    launch = tags(page('autopar-launch.1'))
    compare('option', code['launch-option'], in_section(launch, 'OPTIONS'), 'autopar-launch.1')
    documented_env = set(in_section(launch, 'ENVIRONMENT'))
    for name in sorted(code['launch-env'] - documented_env):
        failures.append(f'autopar-launch.1: variable {name} is set by the launcher but not documented')

    # autopard(8): the options of its --help ("  --config FILE ...").
    daemon_help = run([args.autopard, '--help'])
    compare('option', set(re.findall(r'^\s+(--[a-z][a-z-]*)', daemon_help, re.M)) - {'--help'},
            set(in_section(tags(page('autopard.8')), 'OPTIONS')) - {'--help'}, 'autopard.8')

    # autopard.conf(5), and the example file.
    compare('key', code['autopard-key'], in_section(tags(page('autopard.conf.5')), 'KEYS'),
            'autopard.conf.5')
    compare('key', code['autopard-key'],
            etc_keys(os.path.join(args.etc, 'autopard.conf'), r'^#?([a-z][a-z0-9_]*) ='),
            'etc/autopard.conf')

    # autopar.spank(8): options, plugstack.conf arguments, task variables; and the example file.
    spank = tags(page('autopar.spank.8'))
    compare('option', code['job-option'], in_section(spank, 'OPTIONS'), 'autopar.spank.8')
    compare('argument', code['plugstack-key'], in_section(spank, 'PLUGSTACK ARGUMENTS'),
            'autopar.spank.8')
    compare('variable', code['task-env'], in_section(spank, 'ENVIRONMENT'), 'autopar.spank.8')
    compare('argument', code['plugstack-key'],
            etc_keys(os.path.join(args.etc, 'plugstack.conf.d', 'autopar.conf'),
                     r'^#\s+([a-z][a-z0-9_]*)='),
            'etc/plugstack.conf.d/autopar.conf')

    for f in failures:
        print(f)
    counts = {k: len(v) for k, v in sorted(code.items())}
    print(f'check_man_pages: {len(failures)} difference(s); code lists {counts}, '
          f'{len(commands)} commands')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
