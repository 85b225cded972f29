#!/usr/bin/env bash
# Runs a command in another branch's tree, packed beside this one, so that one leased GPU call can
# check main and a branch not yet merged (the device takes one working tree per call).
#
# Here:        bash scripts/in_branch.sh --pack BRANCH          # writes .device/branch.tgz (git-ignored)
# On the GPU:  bash scripts/in_branch.sh .device/branch.tgz COMMAND...
#   (carry .device/branch.tgz with the MLIR bundle). The tree is unpacked once to /tmp/branch-<commit>;
#   COMMAND runs there with that tree first on PYTHONPATH and MGPU_LAB_COMMIT set to the branch's
#   commit, so its records name the code that made them.
set -euo pipefail
if [[ "${1:-}" == "--pack" ]]; then
  branch="${2:?usage: in_branch.sh --pack BRANCH}"
  cd "$(dirname "$0")/.."
  mkdir -p .device
  # the code, tests and benchmark scripts: not the records, notebooks or screenshots (size)
  # BRANCH_COMMIT: the commit, readable there without git
  git archive --format=tar.gz -o .device/branch.tgz --add-virtual-file="BRANCH_COMMIT:$(git rev-parse --short=7 "$branch")" \
    "$branch" -- \
    mgpu_lab tests scripts pyproject.toml $(git ls-tree --name-only "$branch" benchmarks/ | grep '\.py$')
  echo ".device/branch.tgz: $branch at $(git rev-parse --short=7 "$branch"), $(du -h .device/branch.tgz | cut -f1)"
  exit 0
fi
archive="$(realpath "${1:?usage: in_branch.sh ARCHIVE COMMAND...}")"
shift
commit="$(tar -xzOf "$archive" BRANCH_COMMIT)"
tree="/tmp/branch-$commit"
if [[ ! -d "$tree" ]]; then
  mkdir -p "$tree.partial" && tar -C "$tree.partial" -xzf "$archive" && mv "$tree.partial" "$tree"
fi
cd "$tree"
export PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" MGPU_LAB_COMMIT="$commit"
exec "$@"
