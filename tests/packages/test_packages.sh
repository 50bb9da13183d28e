#!/usr/bin/env bash
# The Debian packages end to end: builds them with CPack from the build directory (and the same
# tree again under a lower version, standing in for the previous release), installs the previous
# ones with dpkg, enables the plugin the way an admin does (uncommenting the line of the installed
# /etc/slurm/plugstack.conf.d/autopar.conf), starts a job on a local cluster of its own that uses
# only installed files (Debian's /etc/slurm/plugstack.conf, the plugin in Slurm's plugin directory,
# /usr/sbin/autopard, /usr/bin/autopar-launch and /usr/bin/autopar, the Python module from
# dist-packages), upgrades to the current packages while the job runs (conffiles kept, the
# postinst restarting autopard, the job riding through), then removes the packages (the conffiles
# stay) and purges them (nothing stays). Prints one line per check.
#
# systemd cannot run as PID 1 on the test machine: for the dpkg calls a recording `systemctl` is
# first on PATH and /run/systemd/system exists, so the maintainer scripts' calls are checked, and
# the restart they ask for is carried out on the cluster's nodes (tests/cluster/node-autopard.sh).
#
# Usage: test_packages.sh BUILD_DIR PLUGIN_DIR   (ctest: integration.packages; run as root)
#   BUILD_DIR is configured for the /usr prefix (scripts/build.sh) and built.
# Refuses to run when autopar is already on this machine (a package, or files where the packages
# go): it would replace that installation and then purge it.
# Environment:
#   AUTOPAR_PACKAGES_DIR        the cluster's directory (default /tmp/autopar-cluster-packages)
#   AUTOPAR_PACKAGES_PORT_BASE  default: the first of 18817, 19817, 20817 whose ports are all free
set -euo pipefail

build=$(cd -- "${1:?usage: test_packages.sh BUILD_DIR PLUGIN_DIR}" && pwd)
plugin_dir=${2:?usage: test_packages.sh BUILD_DIR PLUGIN_DIR}
cluster_scripts=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../cluster" && pwd)
export AUTOPAR_CLUSTER_DIR=${AUTOPAR_PACKAGES_DIR:-/tmp/autopar-cluster-packages}
export SLURM_CONF=$AUTOPAR_CLUSTER_DIR/etc/slurm.conf
snippet=/etc/slurm/plugstack.conf.d/autopar.conf
# Every place the packages put something of their own: none may exist before, or after the purge.
own_paths=(/usr/bin/autopar /usr/bin/autopar-launch /usr/sbin/autopard "$plugin_dir/autopar.so"
  /usr/lib/python3/dist-packages/autopar /usr/include/autopar /usr/libexec/autopar /etc/autopar
  "$snippet" /usr/lib/systemd/system/autopard.service /var/lib/autopard /run/autopard
  /usr/share/doc/autopar /usr/share/doc/autopard /usr/share/doc/autopar-dev)
packages=(autopar autopard autopar-dev)

say() { printf 'packages: %s\n' "$*"; }
# shellcheck source=tests/cluster/checks.sh
source "$cluster_scripts/checks.sh"

# --- refuse to touch an existing installation ------------------------------------------------

((EUID == 0)) || { say "error: run as root (dpkg -i, the cluster)" >&2; exit 1; }
for p in "${packages[@]}"; do
  # db:Status-Abbrev is "un " for a package dpkg knows but that is not installed.
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) || status=""
  if [[ -n $status && $status != "un " ]]; then
    say "error: the package $p is already on this machine (dpkg status '$status'); this test" \
      "installs and purges its own build: remove it first (dpkg -P $p) or run the test elsewhere" >&2
    exit 1
  fi
done
for f in "${own_paths[@]}"; do
  if [[ -e $f ]]; then
    say "error: $f exists but belongs to no autopar package (cmake --install?); this test would" \
      "overwrite it and then purge it: remove that installation first" >&2
    exit 1
  fi
done

# shellcheck source=tests/cluster/ports.sh
source "$cluster_scripts/ports.sh"
export AUTOPAR_CLUSTER_PORT_BASE=${AUTOPAR_PACKAGES_PORT_BASE:-$(free_port_base 18817 20817)}

work=$(mktemp -d /tmp/autopar-packages-test.XXXXXX)
chmod 0755 "$work"
installed=0 cluster=0 fake_systemd=0
# The recording systemctl (see the header), for the dpkg calls.
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "$*" >>%q\n' "$work/systemctl.log" >"$work/bin/systemctl"
chmod 0755 "$work/bin/systemctl"
# fake_systemd: 1 while this test's /run/systemd/system exists, 2 while its /run/systemd does too.
# Only what it made is removed again.
unfake_systemd() {
  ((fake_systemd)) || return 0
  rmdir /run/systemd/system 2>/dev/null || true
  if ((fake_systemd == 2)); then rmdir /run/systemd 2>/dev/null || true; fi
  fake_systemd=0
}
with_systemd() { # with_systemd COMMAND...: runs it with the recording systemctl and /run/systemd/system
  local rc=0
  if [[ ! -e /run/systemd/system ]]; then
    fake_systemd=1
    [[ -e /run/systemd ]] || fake_systemd=2
    mkdir -p /run/systemd/system
  fi
  PATH="$work/bin:$PATH" "$@" || rc=$?
  unfake_systemd
  return "$rc"
}
cleanup() {
  local rc=$?
  if ((cluster)); then stop_own_cluster "$rc"; fi
  # Whatever failed, leave the machine as it was: this test installed them, nobody else had them.
  unfake_systemd
  if ((installed)); then dpkg -P autopar-dev autopard autopar >/dev/null 2>&1 || true; fi
  rm -rf "$work"
  exit_with_verdict "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
t0=$SECONDS

# --- build and inspect the packages ----------------------------------------------------------

# From the build directory as it is (cpack's preinstall step builds nothing after scripts/build.sh).
(cd "$build" && cpack -G DEB -B "$work/packages") >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; stop_here "cpack -G DEB"; }
shopt -s nullglob
debs=("$work"/packages/autopar_*.deb "$work"/packages/autopard_*.deb "$work"/packages/autopar-dev_*.deb)
shopt -u nullglob
((${#debs[@]} == 3)) || stop_here "cpack made autopar_*.deb, autopard_*.deb and autopar-dev_*.deb (got: ${debs[*]})"
ok "cpack -G DEB made $(basename "${debs[0]}"), $(basename "${debs[1]}") and $(basename "${debs[2]}") in $((SECONDS - t0))s"
version=$(dpkg-deb -f "${debs[0]}" Version)
previous="${version}~prev"
(cd "$build" && cpack -G DEB -B "$work/previous" -D CPACK_PACKAGE_VERSION="$previous") \
  >"$work/cpack-previous.log" 2>&1 || { cat "$work/cpack-previous.log" >&2; stop_here "cpack of $previous"; }
shopt -s nullglob
previous_debs=("$work"/previous/autopar_*.deb "$work"/previous/autopard_*.deb "$work"/previous/autopar-dev_*.deb)
shopt -u nullglob
((${#previous_debs[@]} == 3)) || stop_here "cpack made the $previous packages (got: ${previous_debs[*]})"
check "version $previous is older than $version for dpkg" dpkg --compare-versions "$previous" lt "$version"

# contents DEB: its files and links (not directories), one path a line.
contents() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\.||' | sort; }
has_all() { # has_all LIST PATH...: every PATH is a line of LIST.
  local list=$1 f
  shift
  for f in "$@"; do grep -qxF -- "$f" <<<"$list" || { echo "  missing: $f"; return 1; }; done
}
autopar_files=$(contents "${debs[0]}")
autopard_files=$(contents "${debs[1]}")
dev_files=$(contents "${debs[2]}")
check "autopar holds the plugin, launcher, CLI, library, Python module and snippet" \
  has_all "$autopar_files" "$plugin_dir/autopar.so" /usr/bin/autopar-launch /usr/bin/autopar \
  /usr/lib/python3/dist-packages/autopar/__init__.py /usr/lib/python3/dist-packages/autopar/ckpt.py "$snippet" \
  /usr/share/man/man8/autopar.spank.8.gz /usr/share/man/man1/autopar.1.gz /usr/share/doc/autopar/copyright \
  /usr/share/doc/autopar/examples/train.sbatch /usr/share/doc/autopar/examples/train_ddp.py \
  /usr/lib/systemd/system/autopar-goodput.service /usr/lib/systemd/system/autopar-goodput.timer
check "autopar holds libautopar" grep -q '^/usr/lib/.*/libautopar\.so\.[0-9]*$' <<<"$autopar_files"
check "autopard holds the daemon, its unit, configuration and man pages" \
  has_all "$autopard_files" /usr/sbin/autopard /usr/lib/systemd/system/autopard.service \
  /etc/autopar/autopard.conf /usr/share/man/man8/autopard.8.gz /usr/share/man/man5/autopard.conf.5.gz \
  /usr/share/doc/autopard/copyright
check "autopar-dev holds the headers, the libautopar.so link and its copyright" \
  has_all "$dev_files" /usr/include/autopar/autopar_c.h /usr/include/autopar/ckpt_c.h \
  /usr/include/autopar/nccl.h /usr/include/autopar/status.h /usr/share/doc/autopar-dev/copyright
check "autopar-dev holds libautopar.so" grep -q '^/usr/lib/.*/libautopar\.so$' <<<"$dev_files"
check "no header and no libautopar.so link outside autopar-dev" \
  test -z "$(printf '%s\n%s\n' "$autopar_files" "$autopard_files" | grep -E '^/usr/include/|/libautopar\.so$' || true)"
all_files=$(printf '%s\n%s\n%s\n' "$autopar_files" "$autopard_files" "$dev_files")
check "every man page is compressed" test -z "$(grep '^/usr/share/man/' <<<"$all_files" | grep -v '\.gz$' || true)"
check "no example under /etc" test -z "$(grep '^/etc/autopar/examples' <<<"$all_files" || true)"
for deb in "${debs[@]}"; do
  name=$(dpkg-deb -f "$deb" Package)
  copyright=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "./usr/share/doc/$name/copyright" 2>/dev/null || true)
  check "$name's copyright: Debian's format, Apache-2.0 (common-licenses), 2026 the autopar authors" \
    has_all "$copyright" 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
    'Files: *' 'Copyright: 2026 the autopar authors' 'License: Apache-2.0' \
    ' can be found in "/usr/share/common-licenses/Apache-2.0".'
  check "$name's Maintainer is not a local address ($(dpkg-deb -f "$deb" Maintainer))" \
    test -z "$(dpkg-deb -f "$deb" Maintainer | grep -i localhost || true)"
done
check "the three share no file" test -z "$(grep -v '^$' <<<"$all_files" | sort | uniq -d)"
recommends=$(dpkg-deb -f "${debs[0]}" Recommends 2>/dev/null || true)
if grep -q 'libnccl\.so' <<<"$(ldd "$build"/launcher/nccl/libautopar.so 2>/dev/null || true)"; then
  check "autopar recommends NCCL and the CUDA runtime that libautopar links ($recommends)" \
    grep -qE '^libnccl2, cuda-cudart-[0-9]+-[0-9]+$' <<<"$recommends"
fi
check "autopar-dev depends on autopar $version" grep -q "autopar (= $version)" <<<"$(dpkg-deb -f "${debs[2]}" Depends)"
depends=$(dpkg-deb -f "${debs[0]}" Depends)
# AUTOPAR_DEB_SLURM_DEPENDS (cmake/Packaging.cmake): OFF for a site's own Slurm build.
if grep -qx 'AUTOPAR_DEB_SLURM_DEPENDS:BOOL=\(OFF\|NO\|FALSE\|0\)' "$build/CMakeCache.txt"; then
  no_slurm_package() { grep -q python3 <<<"$depends" && ! grep -q slurm-wlm <<<"$depends"; }
  check "autopar depends on python3 and no Slurm package (AUTOPAR_DEB_SLURM_DEPENDS=OFF: $depends)" \
    no_slurm_package
else
  check "autopar depends on the release of Slurm's plugin package it was built for, and python3 ($depends)" \
    grep -qE 'slurm-wlm-basic-plugins \(>= ([0-9]+)\.[0-9]+\), slurm-wlm-basic-plugins \(<< \1\.[0-9]+\).*python3.*libpmix' \
    <<<"$depends"
fi
check "autopard depends on autopar $version and libslurm" \
  grep -qE "autopar \(= $version\).*libslurm" <<<"$(dpkg-deb -f "${debs[1]}" Depends)"

# --- install ---------------------------------------------------------------------------------

installed=1
with_systemd dpkg -i "${previous_debs[@]}" >"$work/dpkg-i.log" 2>&1 || { cat "$work/dpkg-i.log" >&2; stop_here "dpkg -i (every dependency is in scripts/install-deps.sh)"; }
ok "dpkg -i installed the three of $previous"
check "a fresh install started, restarted and enabled nothing (systemctl: $(tr '\n' ';' <"$work/systemctl.log" 2>/dev/null || true))" \
  test -z "$(grep -vx 'daemon-reload' "$work/systemctl.log" 2>/dev/null || true)"
: >"$work/systemctl.log"
conffiles() { dpkg-query -W -f='${Conffiles}\n' "$1" | awk 'NF { print $1 }'; }
check "autopard's conffile: /etc/autopar/autopard.conf" has_all "$(conffiles autopard)" /etc/autopar/autopard.conf
check "autopar's conffile: the snippet" has_all "$(conffiles autopar)" "$snippet"
check "the snippet is installed off (no plugin line)" \
  test -z "$(grep -E '^[[:space:]]*(required|optional)[[:space:]]' "$snippet" || true)"
check "autopard.conf is root-only (0600)" test "$(stat -c %a /etc/autopar/autopard.conf)" = 600
check "postinst made /var/lib/autopard (0700)" test "$(stat -c %a /var/lib/autopard 2>/dev/null)" = 700
started=""
for exe in /proc/[0-9]*/exe; do
  [[ $(readlink "$exe" 2>/dev/null) == /usr/sbin/autopard ]] && started+=" ${exe//[^0-9]/}"
done
check "postinst started no autopard" test -z "$started"
check "the examples are in /usr/share/doc/autopar/examples, not conffiles" \
  test -f /usr/share/doc/autopar/examples/train.sbatch -a -z "$(conffiles autopar | grep examples || true)"
check "ldconfig knows libautopar" grep -q 'libautopar\.so\.[0-9]' <<<"$(ldconfig -p)"
module=$(cd / && env -i PATH=/usr/bin:/bin /usr/bin/python3 -c 'import autopar; print(autopar.__file__)')
check "python3 imports autopar from dist-packages ($module)" \
  test "$module" = /usr/lib/python3/dist-packages/autopar/__init__.py

# --- a job on a cluster of its own, from the installed files only ----------------------------

# The admin's step: uncomment the plugin line, with this cluster's per-node autopard sockets.
sed -i -E "s|^#[[:space:]]*(required [^ ]*/autopar\.so)\$|\1 socket=$AUTOPAR_CLUSTER_DIR/run/autopard-%n.sock|" "$snippet"
check "the admin's edit enabled the snippet's line" grep -qE "^required $plugin_dir/autopar\.so socket=" "$snippet"
# The nodes read Debian's own /etc/slurm/plugstack.conf, which includes plugstack.conf.d/*.conf.
# Nothing of the caller's environment (another cluster's settings, the build tree) reaches them.
t=$SECONDS
cluster=1
env -u AUTOPAR_PLUGSTACK_ARGS -u AUTOPAR_S3_ENDPOINT -u AUTOPAR_AUTOPARD_CONF_EXTRA -u PYTHONPATH \
  AUTOPAR_PLUGSTACK_INCLUDE=/etc/slurm/plugstack.conf AUTOPAR_AUTOPARD=/usr/sbin/autopard \
  AUTOPAR_PLUGIN=/nonexistent "$cluster_scripts/start.sh" --restart >"$work/start.log" 2>&1 ||
  { cat "$work/start.log" >&2; stop_here "start.sh (its own cluster, $AUTOPAR_CLUSTER_DIR)"; }
ok "a cluster of its own started in $((SECONDS - t))s ($AUTOPAR_CLUSTER_DIR, port $AUTOPAR_CLUSTER_PORT_BASE)"

cat >"$work/job.py" <<'EOF'
# One rank: import autopar (from wherever python3 finds it) and commit a checkpoint of steps
# 0..7, one a second (the packages are upgraded and autopard restarted meanwhile).
import os
import time
import autopar
from autopar import ckpt
for step in range(8):
    with open(os.path.join(ckpt.step_dir(step), "rank.txt"), "w") as f:
        f.write(f"rank {ckpt.rank()}\n")
    reply = ckpt.commit(step)
    print(f"STEP {step} RANK {ckpt.rank()} files={reply['files']}", flush=True)
    time.sleep(1)
print(f"RANK {ckpt.rank()} world={os.environ['WORLD_SIZE']} pp={os.environ.get('AUTOPAR_PP')} "
      f"files={reply['files']} module={autopar.__file__}", flush=True)
EOF
cat >"$work/job.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=1 -o $work/job.out
#SBATCH --ckpt-dir=$work/ckpt/%j/%n
#SBATCH --auto-parallel=tp=1,pp=2 --model=llama-2-7b --gpu-type=a100-80gb --global-batch=64 --seq-len=2048
echo "LAUNCHER \$(command -v autopar-launch)"
srun --mpi=pmix autopar-launch -- /usr/bin/python3 $work/job.py
EOF
mkdir -m 0755 "$work/ckpt"
job=$(cd "$work" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF="$SLURM_CONF" \
  sbatch --parsable job.sh 2>"$work/sbatch.err") || { cat "$work/sbatch.err" >&2; stop_here "sbatch with autopar's options"; }
job=${job%%;*}

# --- upgrade to the current packages while the job runs ----------------------------------------

for ((i = 0; i < 120; i++)); do
  grep -q '^STEP 1 ' "$work/job.out" 2>/dev/null && break
  sleep 0.5
done
check "job $job runs (step 1 committed) before the upgrade" grep -q '^STEP 1 ' "$work/job.out"
echo "# the admin's own line" >>/etc/autopar/autopard.conf
: >"$work/systemctl.log"
t=$SECONDS
with_systemd dpkg -i "${debs[@]}" >"$work/dpkg-upgrade.log" 2>&1 ||
  { cat "$work/dpkg-upgrade.log" >&2; stop_here "dpkg -i of $version over $previous"; }
ok "dpkg -i upgraded the three from $previous to $version in $((SECONDS - t))s"
for p in "${packages[@]}"; do
  check "$p is at $version" test "$(dpkg-query -W -f='${Version}' "$p")" = "$version"
done
check "the upgrade kept the admin's edits (the snippet's line, autopard.conf)" \
  bash -c "grep -qE '^required $plugin_dir/autopar\.so socket=' '$snippet' && grep -qx '# the admin.s own line' /etc/autopar/autopard.conf"
check "autopard's postinst asked systemd to restart a running autopard (systemctl: $(tr '\n' ';' <"$work/systemctl.log"))" \
  grep -qx 'try-restart autopard.service' "$work/systemctl.log"
dpkg -L "${packages[@]}" | sort -u >"$work/installed-files"
check "the prerm did not stop autopard on upgrade" test -z "$(grep -x 'stop autopard.service' "$work/systemctl.log" || true)"
# What systemctl try-restart does on a node, done on this cluster's: the new /usr/sbin/autopard
# replaces the running one, under the running job.
restarted=0
for node in node1 node2; do
  AUTOPAR_CLUSTER_DIR=$AUTOPAR_CLUSTER_DIR AUTOPAR_CLUSTER_PORT_BASE=$AUTOPAR_CLUSTER_PORT_BASE \
    "$cluster_scripts/node-autopard.sh" "$node" stop TERM >>"$work/restart.log" 2>&1 &&
  AUTOPAR_CLUSTER_DIR=$AUTOPAR_CLUSTER_DIR AUTOPAR_CLUSTER_PORT_BASE=$AUTOPAR_CLUSTER_PORT_BASE \
    "$cluster_scripts/node-autopard.sh" "$node" start >>"$work/restart.log" 2>&1 && restarted=$((restarted + 1))
done
check "autopard restarted on the job's nodes with the upgraded binary" test "$restarted" = 2
state=""
for ((i = 0; i < 240; i++)); do
  state=$(scontrol -o show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2) || state=""
  case $state in PENDING | RUNNING | CONFIGURING | COMPLETING | "") sleep 0.5 ;; *) break ;; esac
done
out=$(cat "$work/job.out" 2>/dev/null || true)
check "job $job with --ckpt-dir and --auto-parallel COMPLETED (state $state)" test "$state" = COMPLETED
[[ $state == COMPLETED ]] || printf 'its output:\n%s\n' "$out"
check "the job ran /usr/bin/autopar-launch" grep -qx 'LAUNCHER /usr/bin/autopar-launch' <<<"$out"
ranks=$(grep -c "^RANK [01] world=2 pp=2 files=1 module=/usr/lib/python3/dist-packages/autopar/__init__.py\$" <<<"$out" || true)
check "both ranks got the plan, imported autopar from dist-packages and committed steps 0..7 through the upgrade" test "$ranks" = 2
steps=$(/usr/bin/autopar ckpt ls "$job" --json --socket "$AUTOPAR_CLUSTER_DIR/run/autopard-node1.sock" 2>&1 || true)
check "/usr/bin/autopar ckpt ls shows the job's steps 0..7, complete on the node ($steps)" \
  /usr/bin/python3 -c 'import json, sys; s = json.loads(sys.argv[1]); sys.exit(0 if sorted(x["step"] for x in s) == list(range(8)) and all(x["state"] == "COMPLETE-LOCAL" for x in s) else 1)' \
  "$steps" 2>/dev/null
t=$SECONDS
"$cluster_scripts/stop.sh" >"$work/stop.log" 2>&1 || { cat "$work/stop.log" >&2; stop_here "stop.sh"; }
ok "its cluster stopped in $((SECONDS - t))s"

# --- remove: the conffiles (the admin's edit too) and the state stay -------------------------

dpkg -r autopar-dev autopard autopar >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log" >&2; stop_here "dpkg -r"; }
ok "dpkg -r removed the three"
for p in autopar autopard; do
  check "$p is left with its configuration only" test "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p")" = "rc "
done
check "the conffiles stay, the admin's edit with them" \
  grep -qE "^required $plugin_dir/autopar\.so socket=" "$snippet"
check "autopard.conf stays" test -f /etc/autopar/autopard.conf
check "autopard's state stays until the purge" test -d /var/lib/autopard
check "the programs are gone" test ! -e /usr/bin/autopar -a ! -e /usr/sbin/autopard -a ! -e "$plugin_dir/autopar.so"

# --- purge: nothing stays --------------------------------------------------------------------

dpkg -P autopar-dev autopard autopar >"$work/dpkg-p.log" 2>&1 || { cat "$work/dpkg-p.log" >&2; stop_here "dpkg -P"; }
installed=0
ok "dpkg -P purged the three"
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) || status=""
  check "dpkg forgot $p" test -z "$status" -o "$status" = "un "
done
left=()
while read -r f; do
  [[ -e $f || -L $f ]] || continue
  # Directories shared with other packages (/usr/bin, /etc/slurm/plugstack.conf.d, ...) stay.
  [[ -d $f && ! -L $f ]] && dpkg -S "$f" >/dev/null 2>&1 && continue
  left+=("$f")
done <"$work/installed-files"
for f in "${own_paths[@]}"; do [[ -e $f ]] && left+=("$f"); done
left_list=none
((${#left[@]} == 0)) || left_list=$(printf '%s\n' "${left[@]}" | sort -u | tr '\n' ' ')
check "no file of either package is left ($left_list)" test "$left_list" = none
check "ldconfig forgot libautopar" test -z "$(ldconfig -p | grep libautopar || true)"
say "wall time $((SECONDS - t0))s"
