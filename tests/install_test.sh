#!/usr/bin/env bash
# `cmake --install` puts autopar.so in Slurm's plugin directory, the programs in bin, the
# plugstack.conf snippet under <sysconfdir>/slurm/plugstack.conf.d, the examples and each
# package's copyright under <prefix>/share/doc, the man pages compressed by section under MAN_DIR.
# Installs into a DESTDIR staging tree and checks.
# Usage: install_test.sh BUILD_DIR PLUGIN_DIR PREFIX ETC_DIR MAN_DIR   (ETC_DIR: <sysconfdir>/autopar)
set -euo pipefail
build=$1 plugin_dir=$2 prefix=$3 etc_dir=$4 man_dir=$5
snippet=$(dirname -- "$etc_dir")/slurm/plugstack.conf.d/autopar.conf
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
DESTDIR=$stage cmake --install "$build" >/dev/null
fail=0
for f in "$plugin_dir/autopar.so" "$prefix/bin/autopar" "$prefix/bin/autopar-launch" \
  "$snippet" "$prefix/share/doc/autopar/examples/train.sbatch" \
  "$prefix/share/doc/autopar/examples/train_ddp.py" "$man_dir/man1/autopar.1.gz" \
  "$man_dir/man1/autopar-launch.1.gz" "$man_dir/man5/autopard.conf.5.gz" \
  "$man_dir/man8/autopard.8.gz" "$man_dir/man8/autopar.spank.8.gz" \
  "$prefix/share/doc/autopar/copyright" "$prefix/share/doc/autopard/copyright" \
  "$prefix/share/doc/autopar-dev/copyright" "$prefix/share/autopar/grafana/autopar.json"; do
  if [[ -e $stage$f ]]; then echo "installed: $f"; else echo "MISSING: $f"; fail=1; fi
done
# Nothing uncompressed among the man pages, no example left under etc.
if [[ -n $(find "$stage$man_dir" -type f ! -name '*.gz') || -e $stage$etc_dir/examples ]]; then
  echo "WRONG: uncompressed man pages or examples under $etc_dir"
  fail=1
fi
zcat "$stage$man_dir/man8/autopard.8.gz" | grep -q '^.TH AUTOPARD 8' || { echo "autopard.8.gz is not the page"; fail=1; }
# The Python module, where that prefix's python3 finds it (python/CMakeLists.txt).
if compgen -G "$stage$prefix/lib/python3*/dist-packages/autopar/ckpt.py" >/dev/null; then
  echo "installed: the Python module autopar"
else
  echo "MISSING: $prefix/lib/python3*/dist-packages/autopar"
  fail=1
fi
# Exactly the public headers (the C APIs, nccl.h and the status.h it needs), each usable alone
# from the installed tree: internal headers stay beside their sources.
headers=$(cd "$stage$prefix/include" && find . -type f | sort | tr '\n' ' ')
want="./autopar/autopar_c.h ./autopar/ckpt_c.h ./autopar/nccl.h ./autopar/status.h "
if [[ $headers == "$want" ]]; then echo "installed headers: $headers"; else
  echo "WRONG headers: got '$headers', want '$want'"
  fail=1
fi
for h in autopar_c.h ckpt_c.h; do
  echo "#include <autopar/$h>" | cc -fsyntax-only -x c -I "$stage$prefix/include" - || { echo "$h does not compile alone"; fail=1; }
done
for h in nccl.h status.h; do
  echo "#include <autopar/$h>" | c++ -std=c++17 -fsyntax-only -x c++ -I "$stage$prefix/include" - || { echo "$h does not compile alone"; fail=1; }
done
exit "$fail"
