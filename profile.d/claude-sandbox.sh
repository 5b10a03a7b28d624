# claude-sandbox prompt hook, for bash (4.4+) and zsh.
#
# Shows new claude-sandbox alerts (a planted ~/.local/bin/git was quarantined, a hook was planted in
# a repository...) once, just before your next prompt, in every interactive shell outside the jail.
# Installed into /etc/profile.d/ (login shells) and sourced from /etc/bash.bashrc and /etc/zsh/zshrc
# (the non-login shells of VS Code terminals and `docker exec -it`).
#
# The common case (nothing new) costs no fork and no exec: one file test.
# It composes with PROMPT_COMMAND as a string or an array, starship, direnv, bash-preexec and zsh's
# precmd_functions; it keeps $?; it is `set -u` safe; sourcing it twice installs it once.

# Interactive shells only, never inside the jail, never twice in one shell (the guard variable is not
# exported, so a child shell installs its own hook).
case $- in *i*) ;; *) return 0 ;; esac
[ -n "${CLAUDE_SANDBOX-}" ] && return 0
[ -n "${__claude_sandbox_hooked-}" ] && return 0
[ -n "${BASH_VERSION-}" ] || [ -n "${ZSH_VERSION-}" ] || return 0
__claude_sandbox_hooked=1

# The binary, by absolute path (a PATH lookup could find a planted one). The installer rewrites the
# default; tests set __claude_sandbox_bin before sourcing.
__claude_sandbox_bin=${__claude_sandbox_bin:-/usr/local/bin/claude-sandbox}

# The runtime directory, found as `claude-sandbox` finds it (src/runtime_dir.rs), once.
if [ -n "${CLAUDE_SANDBOX_RUNTIME_DIR-}" ]; then
  __claude_sandbox_dir=$CLAUDE_SANDBOX_RUNTIME_DIR
elif [ -d /run/claude-sandbox ] || [ "${UID-}" = 0 ]; then
  __claude_sandbox_dir=/run/claude-sandbox/${UID-}
elif [ -n "${XDG_RUNTIME_DIR-}" ] && [ -d "${XDG_RUNTIME_DIR-}" ]; then
  __claude_sandbox_dir=$XDG_RUNTIME_DIR/claude-sandbox
else
  __claude_sandbox_dir=/var/tmp/claude-sandbox-${UID-}
fi

# Tells `claude-sandbox doctor` that the hook really runs in this shell (set at every prompt).
export CLAUDE_SANDBOX_PROMPT_HOOK=

__claude_sandbox_prompt() {
  local __cs_status=$?
  [ -n "${ZSH_VERSION-}" ] && emulate -L zsh
  CLAUDE_SANDBOX_PROMPT_HOOK=$$
  # alerts.new exists only while some alert has not been shown at a prompt yet.
  if [ -e "$__claude_sandbox_dir/alerts.new" ]; then
    "$__claude_sandbox_bin" alerts --prompt >&2
    # A quarantined command may still be in the shell's hash table: forget it, so the next `git` is
    # the real one.
    if [ -n "${ZSH_VERSION-}" ]; then rehash; else hash -r; fi
  fi
  return $__cs_status
}

if [ -n "${ZSH_VERSION-}" ]; then
  # shellcheck disable=SC2154
  [[ " ${precmd_functions[*]-} " == *" __claude_sandbox_prompt "* ]] || precmd_functions+=(__claude_sandbox_prompt)
else
  case "${PROMPT_COMMAND[*]-}" in
    *__claude_sandbox_prompt*) ;;
    *)
      if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
        # An array (bash 5.1+, e.g. systemd's profile.d snippet): keep element 0, append ours.
        PROMPT_COMMAND[0]=${PROMPT_COMMAND[0]-}
        PROMPT_COMMAND+=(__claude_sandbox_prompt)
      elif [ -n "${PROMPT_COMMAND-}" ]; then
        # A string: run first, and hand the command's $? on to what follows.
        PROMPT_COMMAND="__claude_sandbox_prompt;$PROMPT_COMMAND"
      else
        PROMPT_COMMAND=__claude_sandbox_prompt
      fi
      ;;
  esac
fi
