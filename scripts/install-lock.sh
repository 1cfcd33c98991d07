# Sourced by the scripts that install a tool into .tools/ on first use: `make test` runs its
# steps in two lanes, so two of them may want the same tool at once. `install_lock <name>`
# waits for any other install of <name>, `install_unlock` lets the next one look.
install_lock() {
  mkdir -p "$root/.tools"
  exec 9>"$root/.tools/.$1.lock"
  flock 9
}
install_unlock() {
  exec 9>&-
}
