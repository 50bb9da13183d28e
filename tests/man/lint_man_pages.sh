#!/usr/bin/env bash
# Renders every man page given with groff (-ww: all warnings) and, where Debian's mandoc is
# installed (scripts/install-deps.sh), lints it with mandoc -Tlint (errors, warnings and style);
# any message fails the test.
# Usage: lint_man_pages.sh PAGE...
set -euo pipefail
have_mandoc=0
command -v mandoc >/dev/null 2>&1 && have_mandoc=1
fail=0
for page in "$@"; do
  messages=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || messages+=$'\n'"$page: groff failed"
  if ((have_mandoc)); then
    lint=$(mandoc -Tlint "$page" 2>&1) || true
    messages=${messages:+$messages$'\n'}$lint
  fi
  if [[ -n $messages ]]; then
    echo "$messages"
    echo "$page: NOT clean"
    fail=1
  else
    echo "$page: clean"
  fi
done
((have_mandoc)) || echo "lint_man_pages: mandoc is not installed: rendered with groff only"
exit "$fail"
