#!/usr/bin/env bash
# The documentation's command blocks run as written (docs/README.md, "Code blocks").
#
#   doc_blocks.sh lint             REPO
#   doc_blocks.sh self-test        REPO   (lint on tests/docs/fixtures/bad gives bad.expected)
#   doc_blocks.sh examples         REPO BIN_DIR [TRACES_DIR]
#   doc_blocks.sh examples-traces  REPO BIN_DIR [TRACES_DIR]
#   doc_blocks.sh scenarios        REPO BIN_DIR [TRACES_DIR]
#   doc_blocks.sh scenarios-traces REPO BIN_DIR [TRACES_DIR]
#
# Files: REPO/README.md and REPO/docs/*.md. Every fenced block names a language from the list
# below. ```sh blocks are commands that must run as written; ```text blocks are output, synopses
# or commands that cannot run here, and a ```text block with a command line (one starting with
# `exitsim`, `build/`, `scripts/` or `$ exitsim`) must follow a line
# `<!-- illustrative: REASON -->`. A ```sh block that reads the public request traces follows
# `<!-- needs: traces -->`.
#
# examples: every ```sh block without `needs: traces`, with EXITSIM_TRACES unset (so a block that
#   reads the traces without saying so fails here too). examples-traces: the `needs: traces`
#   blocks, with EXITSIM_TRACES set; exit 77 (skip) when the traces' folder is absent.
#   Each block runs in `bash -e` in a scratch copy of the repository (its files, without build/,
#   out/ or .git; build/release/bin is the tested build's bin folder, also first on PATH), so
#   relative outputs (out/...) land in the copy, never in the repository, and nothing outside
#   the copy (../shared) can be reached by a relative path. The blocks of one file run in order
#   in one copy (a block may use what an earlier block of its file made); each file gets its own
#   copy. Absolute outputs (/tmp/...) are the block's own business.
# scenarios / scenarios-traces: `exitsim simulate --no-output` on every scenarios/examples/*.yaml
#   that does not / does name $EXITSIM_TRACES, the same way.
# TRACES_DIR: the traces' folder when $EXITSIM_TRACES is not set in the environment.
set -euo pipefail

mode=${1:?mode}
repo=$(cd "${2:?repository}" && pwd)
bin_dir=${3:-}
traces_default=${4:-}
languages="sh text yaml csv json cpp"
command_pattern='^(exitsim|build/|scripts/|\$ exitsim)'

doc_files() {
  printf '%s\n' "$repo/README.md"
  find "$repo/docs" -maxdepth 1 -name '*.md' | LC_ALL=C sort
}

# Prints one record per fenced block: FILE, LINE, LANG, MARKER, COMMANDLINE (separated by \037).
# MARKER is the block's marker: an `illustrative:` or `needs:` comment among the HTML comment
# lines right before the fence (blank lines aside; so the README's set-up blocks carry theirs
# before their <!-- main-command --> / <!-- test-command --> markers, which .ci/run reads), ""
# without one. COMMANDLINE is 1 when a line of the block is a command. An unclosed block is an
# error on stderr.
list_blocks() {
  local file=$1
  awk -v file="$file" -v shown="${file#"$repo"/}" -v pattern="$command_pattern" '
    function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    !in_block && /^[ \t]*```/ {
      lang = trim($0); sub(/^```/, "", lang); lang = trim(lang)
      # The README'"'"'s two set-up blocks keep a bare fence: whatever reads them verbatim
      # (.ci/run, a harness) gets the command alone. They build everything: never run here.
      if (lang == "" && setup) lang = "setup"
      in_block = 1; start = NR; commands = 0; marker = found; setup = 0
      next
    }
    in_block && /^[ \t]*```[ \t]*$/ {
      printf "%s\037%d\037%s\037%s\037%d\n", file, start, lang, marker, commands
      in_block = 0; found = ""; next
    }
    in_block { if (trim($0) ~ pattern) commands = 1; next }
    trim($0) ~ /^<!--.*-->$/ {
      if (trim($0) ~ /^<!-- *(illustrative|needs)/) found = trim($0)
      if (trim($0) ~ /^<!-- (main|test)-command -->$/) setup = 1
      next
    }
    trim($0) != "" { found = ""; setup = 0 }
    END { if (in_block) { printf "%s:%d: expected a closing ``` for this block, found the end of the file\n", shown, start > "/dev/stderr"; exit 1 } }
  ' "$file"
}

# The lines of the block that opens at line START of FILE, its fence's indentation removed.
block_text() {
  awk -v start="$2" '
    NR == start { indent = match($0, /[^ \t]/) - 1; in_block = 1; next }
    in_block && /^[ \t]*```[ \t]*$/ { exit }
    in_block { print substr($0, indent + 1) }
  ' "$1"
}

lint() {
  local errors=0 file line lang marker commands
  while IFS= read -r file; do
    local records
    if ! records=$(list_blocks "$file"); then
      errors=$((errors + 1))
    fi
    while IFS=$'\037' read -r file line lang marker commands; do
      [ -n "$file" ] || continue
      local where=${file#"$repo"/}:$line
      [ "$lang" = setup ] && continue
      if [ -z "$lang" ]; then
        echo "$where: expected a language after \`\`\` (one of: $languages), found none" >&2
        errors=$((errors + 1))
        continue
      fi
      if ! grep -qw -- "$lang" <<<"$languages"; then
        echo "$where: expected a block language of: $languages; found \"$lang\"" >&2
        errors=$((errors + 1))
      fi
      if [[ $marker == "<!-- illustrative:"* ]]; then
        if [ "$lang" != text ]; then
          echo "$where: an illustrative marker goes before a \`\`\`text block, found \`\`\`$lang" >&2
          errors=$((errors + 1))
        elif ! [[ $marker =~ ^'<!-- illustrative: '[^[:space:]].*' -->'$ ]]; then
          echo "$where: expected <!-- illustrative: REASON --> with a reason, found $marker" >&2
          errors=$((errors + 1))
        fi
      elif [ "$lang" = text ] && [ "$commands" = 1 ]; then
        echo "$where: a \`\`\`text block with a command must follow <!-- illustrative: REASON -->" \
          "(or be a \`\`\`sh block that runs as written)" >&2
        errors=$((errors + 1))
      fi
      if [[ $marker == "<!-- needs:"* ]]; then
        if [ "$marker" != "<!-- needs: traces -->" ]; then
          echo "$where: expected <!-- needs: traces -->, found $marker" >&2
          errors=$((errors + 1))
        elif [ "$lang" != sh ]; then
          echo "$where: <!-- needs: traces --> goes before a \`\`\`sh block, found \`\`\`$lang" >&2
          errors=$((errors + 1))
        fi
      fi
      if [ "$lang" = sh ] && block_text "$file" "$line" | grep -q '^\$ '; then
        echo "$where: a \`\`\`sh block runs as written: expected commands, found a \"\$ \" prompt" >&2
        errors=$((errors + 1))
      fi
    done <<<"$records"
  done < <(doc_files)
  if [ "$errors" -gt 0 ]; then
    echo "doc_blocks: $errors problem(s) in the documentation's code blocks" >&2
    exit 1
  fi
  echo "doc_blocks: every code block names its language; illustrative commands are marked"
}

# Scratch copies are removed however the script ends (a failed block, a ctest timeout).
scratch_root=$(mktemp -d "${TMPDIR:-/tmp}/exitsim-docs.XXXXXX")
trap 'rm -rf "$scratch_root"' EXIT

# Sets up a scratch copy of the repository; prints its path.
scratch_copy() {
  local scratch
  scratch=$(mktemp -d "$scratch_root/copy.XXXXXX")
  local entry
  for entry in "$repo"/* "$repo"/.[!.]*; do
    case ${entry##*/} in
      build | out | .git | .cache | .gpu-deps | '.[!.]*' | '*') continue ;;
    esac
    cp -a "$entry" "$scratch/"
  done
  mkdir -p "$scratch/build/release"
  ln -s "$bin_dir" "$scratch/build/release/bin"
  printf '%s\n' "$scratch"
}

traces_dir() {
  if [ -n "${EXITSIM_TRACES:-}" ] && [ -d "$EXITSIM_TRACES" ]; then
    (cd "$EXITSIM_TRACES" && pwd)
  elif [ -n "$traces_default" ] && [ -d "$traces_default" ]; then
    (cd "$traces_default" && pwd)
  fi
}

# Runs FILE's ```sh blocks (those with `needs: traces` when WANT_TRACES is 1, the others when 0).
run_blocks() {
  local want_traces=$1 traces=$2 ran=0 failed=0 scratch="" file line lang marker commands
  while IFS= read -r file; do
    scratch=""
    while IFS=$'\037' read -r file line lang marker commands; do
      [ "$lang" = sh ] || continue
      local needs=0
      [ "$marker" = "<!-- needs: traces -->" ] && needs=1
      [ "$needs" = "$want_traces" ] || continue
      [ -n "$scratch" ] || scratch=$(scratch_copy)
      local where=${file#"$repo"/}:$line
      block_text "$file" "$line" >"$scratch/.block.sh"
      local start=$SECONDS status=0
      (
        cd "$scratch"
        export PATH="$bin_dir:$PATH"
        if [ "$want_traces" = 1 ]; then export EXITSIM_TRACES="$traces"; else unset EXITSIM_TRACES; fi
        timeout 300 bash -e .block.sh </dev/null
      ) >"$scratch/.block.log" 2>&1 || status=$?
      ran=$((ran + 1))
      if [ "$status" -ne 0 ]; then
        failed=$((failed + 1))
        echo "FAIL $where (exit $status, $((SECONDS - start)) s): the block" >&2
        sed 's/^/  | /' "$scratch/.block.sh" >&2
        echo "  its output (last 40 lines):" >&2
        tail -n 40 "$scratch/.block.log" | sed 's/^/  > /' >&2
      else
        echo "ok   $where ($((SECONDS - start)) s)"
      fi
    done < <(list_blocks "$file")
    [ -z "$scratch" ] || rm -rf "$scratch"
  done < <(doc_files)
  echo "doc_blocks: $ran block(s) run, $failed failed"
  [ "$failed" -eq 0 ] || exit 1
  [ "$ran" -gt 0 ] || { echo "doc_blocks: expected at least one block to run, found none" >&2; exit 1; }
}

# simulate --no-output on the example scenarios that do (1) or do not (0) name $EXITSIM_TRACES.
run_scenarios() {
  local want_traces=$1 traces=$2 ran=0 failed=0 scratch example
  scratch=$(scratch_copy)
  for example in "$scratch"/scenarios/examples/*.yaml; do
    local needs=0
    grep -q 'EXITSIM_TRACES' "$example" && needs=1
    [ "$needs" = "$want_traces" ] || continue
    local name=scenarios/examples/${example##*/} start=$SECONDS status=0
    (
      cd "$scratch"
      if [ "$want_traces" = 1 ]; then export EXITSIM_TRACES="$traces"; else unset EXITSIM_TRACES; fi
      timeout 300 "$bin_dir/exitsim" simulate "$name" --no-output </dev/null
    ) >"$scratch/.scenario.log" 2>&1 || status=$?
    ran=$((ran + 1))
    if [ "$status" -ne 0 ]; then
      failed=$((failed + 1))
      echo "FAIL exitsim simulate $name --no-output (exit $status):" >&2
      tail -n 20 "$scratch/.scenario.log" | sed 's/^/  > /' >&2
    else
      echo "ok   exitsim simulate $name --no-output ($((SECONDS - start)) s)"
    fi
  done
  rm -rf "$scratch"
  echo "doc_blocks: $ran example scenario(s) simulated, $failed failed"
  [ "$failed" -eq 0 ] || exit 1
  [ "$ran" -gt 0 ] || { echo "doc_blocks: expected at least one example scenario, found none" >&2; exit 1; }
}

case $mode in
  lint) lint ;;
  self-test)
    # lint rejects each broken block of the fixture with the expected line, and passes the good ones.
    fixture=$repo/tests/docs/fixtures/bad
    got=$("$0" lint "$fixture" 2>&1 >/dev/null) && { echo "doc_blocks: lint accepted $fixture" >&2; exit 1; }
    if ! diff -u "$fixture.expected" - <<<"$got"; then
      echo "doc_blocks: lint's findings on $fixture differ from $fixture.expected (above)" >&2
      exit 1
    fi
    echo "doc_blocks: lint finds every broken block of the fixture, and only those"
    ;;
  examples | examples-traces | scenarios | scenarios-traces)
    [ -x "$bin_dir/exitsim" ] || { echo "doc_blocks: expected the built exitsim in $bin_dir" >&2; exit 1; }
    bin_dir=$(cd "$bin_dir" && pwd)
    traces=$(traces_dir)
    want=0
    if [[ $mode == *-traces ]]; then
      want=1
      if [ -z "$traces" ]; then
        echo "doc_blocks: skipped: no public traces' folder (set EXITSIM_TRACES; looked for ${traces_default:-none})"
        exit 77
      fi
    fi
    if [[ $mode == examples* ]]; then run_blocks "$want" "$traces"; else run_scenarios "$want" "$traces"; fi
    ;;
  *)
    echo "doc_blocks: unknown mode \"$mode\" (lint, examples, examples-traces, scenarios, scenarios-traces)" >&2
    exit 2
    ;;
esac
