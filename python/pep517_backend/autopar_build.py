"""The in-tree PEP 517 backend of `pip install ./python`: a wheel of the autopar package built with
the standard library alone, so that pip needs nothing from an index (no setuptools, no wheel) and
installs offline into any virtual environment. pyproject.toml names it (backend-path; not "build*": that is a build tree to .gitignore)."""
import base64
import hashlib
import os
import re
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/


def _project():
    """name, version, requires-python and the extras ([project.optional-dependencies]) from
    pyproject.toml (regexes: tomllib is 3.11's, and the file is ours)."""
    with open(os.path.join(HERE, "pyproject.toml")) as f:
        text = f.read()
    fields = dict(re.findall(r'^(name|version|requires-python|description)\s*=\s*"([^"]*)"', text, re.M))
    extras = re.search(r"^\[project\.optional-dependencies\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    fields["extras"] = {name: re.findall(r'"([^"]+)"', items) for name, items in
                        re.findall(r"^([a-z0-9-]+)\s*=\s*\[([^\]]*)\]", extras.group(1) if extras else "", re.M)}
    return fields


def _metadata(p):
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", f"Requires-Python: {p.get('requires-python', '>=3.9')}",
             "License: Apache-2.0"]
    for extra, requirements in p["extras"].items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {r}; extra == \"{extra}\"" for r in requirements]
    return "\n".join(lines) + "\n"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    dist_info = f"{p['name']}-{p['version']}.dist-info"
    wheel_name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    files = []
    for folder, dirs, names in os.walk(os.path.join(HERE, "autopar")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py") or name == "py.typed":
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    files.append((os.path.relpath(path, HERE).replace(os.sep, "/"), f.read()))
    files.append((f"{dist_info}/METADATA", _metadata(p).encode()))
    files.append((f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: autopar_build\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    record = [_record_line(n, d) for n, d in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            z.writestr(name, data)
    return wheel_name


def get_requires_for_build_wheel(config_settings=None):
    return []
