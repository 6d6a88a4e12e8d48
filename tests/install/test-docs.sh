#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The man pages render with no warning (groff -ww, man -l), and what
# `hugeroomctl --help` offers (every command, every option) is in
# hugeroomctl(8) and in the bash completion; every hugeroomd.conf key is in
# hugeroomd.conf(5). TAP output.
set -uo pipefail

: "${HUGEROOM_BUILD:?}" "${HR_DOC:?}" "${HR_CONF:?}"

. "$(dirname "$0")/tap.sh"

pages=(hugeroomd.8 hugeroomctl.8 hugeroom-hook.8 hugeroomd.conf.5)
echo "1..$((${#pages[@]} * 2 + 5))"

for p in "${pages[@]}"; do
    out=$(LC_ALL=C.UTF-8 groff -man -z -ww -b "$HR_DOC/$p" 2>&1)
    ok "$([ -z "$out" ]; echo $?)" "$p: groff -man -ww renders it without a warning" "$out"
    text=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=w -l "$HR_DOC/$p" 2>&1 >/dev/null)
    ok "$([ -z "$text" ]; echo $?)" "$p: man -l renders it without a warning" "$text"
done

help=$("$HUGEROOM_BUILD/host/hugeroomctl" --help)
# the first word of each line of the Commands: section that starts one
commands=$(sed -n '/^Commands:/,/^$/p' <<<"$help" | sed -n 's/^  \([a-z][a-z-]*\).*/\1/p' | sort -u)
options=$(sed -n '/^\(Application \)\{0,1\}Options:/,/^$/p' <<<"$help" |
    grep -o -- '--[a-z][a-z-]*' | sort -u)
[ "$(wc -l <<<"$commands")" -ge 15 ] && [ "$(wc -l <<<"$options")" -ge 10 ]
ok $? "--help lists $(wc -l <<<"$commands") commands and $(wc -l <<<"$options") options" "$help"

# the head of each item in COMMANDS, roff escapes undone
man_commands=$(sed -n '/^\.SH COMMANDS/,/^\.SH OPTIONS/p' "$HR_DOC/hugeroomctl.8" |
    sed -n '/^\.TP/{n;s/^\.BI\{0,1\} "\{0,1\}\([a-z\\-]*\).*/\1/p}' | sed 's/\\-/-/g' | sort -u)
man_text=$(sed 's/\\-/-/g' "$HR_DOC/hugeroomctl.8")
missing=""
for o in $options; do
    grep -qF -- "$o" <<<"$man_text" || missing="$missing $o"
done
ok "$([ "$man_commands" = "$commands" ] && [ -z "$missing" ]; echo $?)" \
    "hugeroomctl(8) documents every command and option of --help" \
    "commands: $(diff <(echo "$commands") <(echo "$man_commands") | grep '^[<>]' | tr '\n' ' ')
options missing:$missing"

# the completion asks hugeroomctl (__complete), which must know what --help lists
comp="$HR_DOC/hugeroomctl.bash-completion"
comp_commands=$("$HUGEROOM_BUILD/host/hugeroomctl" __complete commands | sort -u)
comp_options=$(for c in $commands; do "$HUGEROOM_BUILD/host/hugeroomctl" __complete options "$c"; done |
    sort -u)
ok "$([ "$comp_commands" = "$commands" ] && [ -z "$(comm -23 <(echo "$options") <(echo "$comp_options"))" ]; echo $?)" \
    "the bash completion offers every command and option of --help" \
    "commands: $(diff <(echo "$commands") <(echo "$comp_commands") | grep '^[<>]' | tr '\n' ' ')
options missing: $(comm -23 <(echo "$options") <(echo "$comp_options") | tr '\n' ' ')"

# bash itself: the script loads and completes the commands and a command's options
got=$(PATH="$HUGEROOM_BUILD/host:$PATH" bash -c '
    _init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]};
                         words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
    . "$1"
    COMP_WORDS=(hugeroomctl pl); COMP_CWORD=1; _hugeroomctl; echo "${COMPREPLY[*]}"
    COMP_WORDS=(hugeroomctl plan 4G --st); COMP_CWORD=3; _hugeroomctl; echo "${COMPREPLY[*]}"
' _ "$comp" 2>&1)
ok "$([ "$got" = $'plan\n--strict' ]; echo $?)" "bash completes 'pl' to plan and '--st' to --strict" "$got"

missing=""
for key in $(sed -n 's/^\([a-z_]*\)=.*/\1/p' "$HR_CONF"); do
    grep -q "^\.BR $key " "$HR_DOC/hugeroomd.conf.5" || missing="$missing $key"
done
ok "$([ -z "$missing" ]; echo $?)" "hugeroomd.conf(5) documents every key of hugeroomd.conf" \
    "missing:$missing"

[ "$failed" = 0 ]
