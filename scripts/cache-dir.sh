# shellcheck shell=bash
# The user-level cache folder, for the launcher (./cflow) and
# scripts/fetch-models.sh; sourced, not run. runtime/cache_paths.ts applies
# the same rules in TypeScript.
#
#   cflow_cache_root      prints CFLOW_CACHE, else $XDG_CACHE_HOME/cflow,
#                         else $HOME/.cache/cflow (an empty variable counts as
#                         unset); returns 2 with a message on stderr when the
#                         one used is not an absolute path or holds a comma
#                         (Deno's permission lists are comma-separated) or a
#                         control character. Creates nothing.
#   cflow_cache_prepare   creates the cache's models/ and converted/ (0700 when
#                         new) and prints the cache folder with symlinks
#                         resolved; returns 1 when it cannot be created.
#   cflow_link_checkout_models ROOT MODELS
#                         makes ROOT/cache/models (a checkout's old model
#                         folder, which tests and scripts still name) a link
#                         to MODELS, moving the models found there into MODELS
#                         once (see the function).

cflow_cache_root() {
  local name value dir
  if [ -n "${CFLOW_CACHE:-}" ]; then
    name=CFLOW_CACHE value="$CFLOW_CACHE" dir="$CFLOW_CACHE"
  elif [ -n "${XDG_CACHE_HOME:-}" ]; then
    name=XDG_CACHE_HOME value="$XDG_CACHE_HOME" dir="$XDG_CACHE_HOME/cflow"
  elif [ -n "${HOME:-}" ]; then
    name=HOME value="$HOME" dir="$HOME/.cache/cflow"
  else
    echo "cflow: no cache folder: set CFLOW_CACHE (or XDG_CACHE_HOME or HOME) to an absolute path" >&2
    return 2
  fi
  case "$value" in
    *[[:cntrl:]]*) echo "cflow: $name must not contain control characters" >&2; return 2 ;;
    /*) ;;
    *) echo "cflow: $name must be an absolute path (starting with '/'), not \"$value\"" >&2; return 2 ;;
  esac
  case "$dir" in
    *,*) echo "cflow: the cache folder \"$dir\" ($name) must not contain a comma" >&2; return 2 ;;
  esac
  while [ "${#dir}" -gt 1 ] && [ "${dir%/}" != "$dir" ]; do dir="${dir%/}"; done
  printf '%s\n' "$dir"
}

cflow_cache_prepare() {
  local dir real
  dir="$(cflow_cache_root)" || return
  if ! (umask 077 && mkdir -p -- "$dir/models" "$dir/converted"); then
    echo "cflow: cannot create the cache folder $dir" >&2
    return 1
  fi
  real="$(readlink -f -- "$dir")" || return 1
  case "$real" in
    *,*) echo "cflow: the cache folder \"$real\" must not contain a comma" >&2; return 2 ;;
  esac
  printf '%s\n' "$real"
}

# _cflow_move SRC DST: moves SRC (a file or a folder) to DST, which does not
# exist, so that DST is never seen partly written: a rename on one file
# system, else a copy to a temporary name beside DST, synced to disk, renamed,
# and only then SRC removed.
_cflow_move() {
  local src="$1" dst="$2" tmp
  if [ "$(stat -c %d -- "$src")" = "$(stat -c %d -- "$(dirname -- "$dst")")" ]; then
    mv -T -n -- "$src" "$dst"
    [ ! -e "$src" ] || { echo "cflow: could not move $src to $dst" >&2; return 1; }
    return 0
  fi
  tmp="$(dirname -- "$dst")/.$(basename -- "$dst").move.$$"
  rm -rf -- "$tmp"
  cp -a -- "$src" "$tmp" && sync -- "$tmp" && mv -T -n -- "$tmp" "$dst" && [ ! -e "$tmp" ] \
    || { rm -rf -- "$tmp"; echo "cflow: could not copy $src to $dst" >&2; return 1; }
  rm -rf -- "$src"
}

# _cflow_merge SRC DST: moves what SRC holds into DST, entry by entry:
# an entry DST lacks is moved; two folders are merged; two files with the
# same bytes leave one (SRC's is removed); two files that differ are both
# kept (SRC's stays where it is) and named on stderr. Returns 1 when
# something was left in SRC.
_cflow_merge() {
  local src="$1" dst="$2" entry name left=0
  for entry in "$src"/* "$src"/.[!.]* "$src"/..?*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    name="$(basename -- "$entry")"
    case "$name" in
      *.tmp.* | *.tmp-* | .*.move.*)
        # A temporary file: another run's, unfinished; removed once an hour old (its run is gone).
        if [ -n "$(find "$entry" -maxdepth 0 -mmin +60 2>/dev/null)" ]; then
          rm -rf -- "$entry"
        else
          echo "cflow: $entry is being written by another run: left where it is" >&2
          left=1
        fi
        continue
        ;;
    esac
    if [ ! -e "$dst/$name" ] && [ ! -L "$dst/$name" ]; then
      _cflow_move "$entry" "$dst/$name" || left=1
    elif [ -d "$entry" ] && [ ! -L "$entry" ] && [ -d "$dst/$name" ]; then
      _cflow_merge "$entry" "$dst/$name" || left=1
      rmdir -- "$entry" 2>/dev/null || left=1
    elif [ -f "$entry" ] && [ -f "$dst/$name" ] && cmp -s -- "$entry" "$dst/$name"; then
      rm -f -- "$entry"
    else
      echo "cflow: $entry differs from $dst/$name: left where it is" >&2
      left=1
    fi
  done
  return "$left"
}

# cflow_link_checkout_models ROOT MODELS: checkouts made before the user-level
# cache kept their models in ROOT/cache/models, and tests, benchmarks and
# fixtures still name that path. This moves what it holds into MODELS once
# (under a lock, so that two runs cannot both move) and makes it a link to
# MODELS, so both names reach one copy. Nothing happens when ROOT/cache/models
# already is MODELS (CFLOW_CACHE=ROOT/cache, as the tests set it). A link to
# another folder (CFLOW_CACHE changed) is pointed at MODELS. When two models
# of one name differ, the old folder is kept as it is, with a message.
cflow_link_checkout_models() {
  local root="$1" models="$2" legacy="$1/cache/models" link
  [ -e "$legacy" ] && [ "$legacy" -ef "$models" ] && return 0
  mkdir -p -- "$root/cache" || return 0
  link="$root/cache/.models.link.$$"
  if [ -L "$legacy" ] || [ ! -e "$legacy" ]; then
    ln -sfn -- "$models" "$link" && mv -T -- "$link" "$legacy" ||
      { rm -f -- "$link"; echo "cflow: could not make $legacy a link to $models" >&2; }
    return 0
  fi
  [ -d "$legacy" ] || { echo "cflow: $legacy is not a folder; not linked to $models" >&2; return 0; }
  (
    exec 9>"$(dirname -- "$models")/.checkout-move.lock"
    if command -v flock >/dev/null 2>&1; then flock 9; fi
    # Another run may have finished the move while this one waited.
    if [ -L "$legacy" ] || [ ! -e "$legacy" ] || [ "$legacy" -ef "$models" ]; then exit 0; fi
    echo "cflow: moving the models in $legacy into the user cache $models (once)" >&2
    if ! _cflow_merge "$legacy" "$models"; then
      echo "cflow: $legacy was not replaced by a link to $models; move or remove what is left there" >&2
      exit 0
    fi
    if rmdir -- "$legacy" && ln -sfn -- "$models" "$link" && mv -T -- "$link" "$legacy"; then
      echo "cflow: $legacy is now a link to $models" >&2
    else
      rm -f -- "$link"
      echo "cflow: could not make $legacy a link to $models" >&2
    fi
  ) || true
}
