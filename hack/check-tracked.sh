#!/usr/bin/env bash
# hack/check-tracked.sh: fails when git tracks a build output or a merge
# conflict left unresolved. A tracked file must not be an executable binary
# (ELF, Mach-O, PE, WebAssembly), must not be over 2 MB unless it is the
# embedded schema (internal/schemagen/default) or test data (a testdata/
# folder), and no tracked text file may hold a conflict marker line. Run by
# `make test` (make tracked-check); hack/tracked_test.go tests it.
#
# It costs a few processes, not a few per tracked file: every executable
# format above holds NUL bytes, which is what git calls binary (i/-text in
# `git ls-files --eol`), so only those files have their first bytes read; one
# stat reads every size.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
limit=$((2 * 1024 * 1024))
bad=0
while IFS= read -r -d '' entry; do
  f=${entry#*$'\t'}
  [[ $entry == i/-text* && -f $f && ! -L $f ]] || continue
  magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
  case $magic in
    7f454c46 | feedface | feedfacf | cefaedfe | cffaedfe | cafebabe | 0061736d | 4d5a*)
      echo "tracked executable binary: $f (remove it: git rm --cached '$f'; build outputs go to bin/)" >&2
      bad=1 ;;
  esac
done < <(git ls-files -z --eol)
# Symbolic links count as their own size; a tracked file missing from the
# work tree has no size to check.
while IFS=$'\t' read -r -d '' size f; do
  ((size > limit)) || continue
  case $f in
    internal/schemagen/default/* | */testdata/* | testdata/*) ;;
    *) echo "tracked file over 2 MB: $f ($size bytes)" >&2; bad=1 ;;
  esac
done < <(git ls-files -z | xargs -0 -r stat --printf '%s\t%n\0' -- 2>/dev/null || true)
# Conflict markers, as git writes them (and as `git diff --check` finds
# them): a line that starts with seven '<', '>' or '|' (diff3's base) then a
# space or the line's end, or one that is exactly seven '=' (a CRLF line
# too). A Markdown setext underline of any other length is fine; one of
# exactly seven reads as a marker, so lengthen it. git grep reads the work
# tree's copy of every tracked file, skipping binary ones (-I).
cr=$'\r'
if markers=$(git grep -I -n -E -e "^(<{7}|>{7}|[|]{7})( |$cr?\$)" -e "^={7}$cr?\$" -- .); then
  echo "tracked files hold merge conflict markers (resolve the conflict; a Markdown heading underline needs other than 7 '='):" >&2
  echo "$markers" >&2
  bad=1
elif (($? > 1)); then
  echo "git grep failed while looking for conflict markers" >&2
  bad=1
fi
exit $bad
