# Sourced by the mutation scripts: `mutants_tree <root> <tree> [with-uncommitted]` makes <tree>
# a git worktree of <root>'s HEAD, clean (reset, untracked files gone), created on first use and
# reused after, so that its build directory stays warm and only what a mutant touches rebuilds.
# With `with-uncommitted`, the checkout's uncommitted changes to tracked files go on top (so
# that a diff against a base names lines the tree holds). The checkout itself is never touched.
mutants_tree() {
  local root="$1" tree="$2" with="${3:-}"
  if [ -e "$tree/.git" ]; then
    git -C "$tree" reset --quiet --hard
    git -C "$tree" clean --quiet -fd
    git -C "$tree" checkout --quiet --detach "$(git -C "$root" rev-parse HEAD)"
  else
    rm -rf "$tree"
    git -C "$root" worktree prune
    git -C "$root" worktree add --detach "$tree" HEAD >/dev/null
  fi
  if [ "$with" = with-uncommitted ]; then
    git -C "$root" diff HEAD | { git -C "$tree" apply --allow-empty 2>/dev/null || true; }
  fi
}
