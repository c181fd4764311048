#!/usr/bin/env bash
# Fails when a C++ file under version control differs from clang-format-14's layout (.clang-format:
# Google style, 100 columns). Fix with: git ls-files '*.cc' '*.h' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z "$fmt" ]]; then
  echo "check-format: clang-format-14 is not installed (scripts/install-deps.sh --test installs it)" >&2
  exit 2
fi
bad=()
while IFS= read -r f; do
  "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h')
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format's layout:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: git ls-files '*.cc' '*.h' | xargs $fmt -i" >&2
  exit 1
fi
echo "check-format: $(git ls-files '*.cc' '*.h' | wc -l) files match .clang-format"
