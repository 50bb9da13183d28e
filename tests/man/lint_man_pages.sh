#!/usr/bin/env bash
# Renders every man page given with groff (-ww: all warnings) and lints it with Debian's mandoc
# -Tlint (errors, warnings and style); any message fails the test, and so does a missing mandoc
# (scripts/install-deps.sh installs it): groff alone lets most mistakes through.
# Usage: lint_man_pages.sh PAGE...
set -euo pipefail
if ! command -v mandoc >/dev/null 2>&1; then
  echo "lint_man_pages: mandoc is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
fail=0
for page in "$@"; do
  messages=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || messages+=$'\n'"$page: groff failed"
  lint=$(mandoc -Tlint "$page" 2>&1) || true
  messages=${messages:+$messages$'\n'}$lint
  if [[ -n $messages ]]; then
    echo "$messages"
    echo "$page: NOT clean"
    fail=1
  else
    echo "$page: clean"
  fi
done
exit "$fail"
