# Sourced by the scripts that install a pinned tool on first use (the Python tools' venvs,
# cargo-lambda, DynamoDB Local). Each tool lives in a per-user cache shared by every clone,
# `$tools_root/<tool>-<pin>`: like cargo's registry, an install is made once per machine and
# pin, not once per clone (a fresh clone's make test spent about 130 core-seconds installing
# them again beside its test build). `WSDR_TOOLS` moves the cache.
#
# `make test` runs its steps in two lanes and several clones may run at once, so two of them
# may want the same tool at once: `install_lock <name>` waits for any other install of
# <name> (a lock in the cache), `install_unlock` lets the next one look. An install is
# complete only once its stamp is written; a directory without its stamp is removed and
# installed again.
tools_root="${WSDR_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/wsdr-tools}"
install_lock() {
  mkdir -p "$tools_root"
  exec 9>"$tools_root/.$1.lock"
  flock 9
}
install_unlock() {
  exec 9>&-
}
