#!/usr/bin/env bash
# The README and docs send users only to files a clone has: every relative Markdown
# link resolves inside the repository, and nothing points outside it (the team's
# shared folder is not part of a clone; the contract is docs/CONTRACT.md).
#   docs_links.sh REPOSITORY
set -uo pipefail
cd "$1" || exit 1
bad=0 links=0
for doc in README.md docs/*.md datasets/README.md; do
  [[ -e $doc ]] || continue
  folder=$(dirname "$doc")
  while IFS= read -r target; do
    target=${target%%#*}
    [[ -z $target || $target =~ ^[a-z]+: ]] && continue
    links=$((links + 1))
    if [[ ! -e $folder/$target ]]; then
      echo "FAIL $doc links to $target, which is not in the repository"
      bad=$((bad + 1))
    fi
  done < <(grep -oE '\]\([^)]+\)' "$doc" | sed -E 's/^\]\((.*)\)$/\1/')
  if grep -nE '\.\./shared|shared folder|shared/CONTRACT' "$doc"; then
    echo "FAIL $doc points at the team's shared folder, which users do not have"
    bad=$((bad + 1))
  fi
done
grep -q '(docs/CONTRACT.md)' README.md || { echo "FAIL README.md does not link docs/CONTRACT.md"; bad=$((bad + 1)); }
echo "docs: $links relative links checked; $((bad == 0 ? 1 : 0)) passed, $bad failed"
((bad == 0))
