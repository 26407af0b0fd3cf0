#!/usr/bin/env bash
# Installs what `jupyter nbconvert --execute` needs to run the notebooks in examples/ headless,
# and registers the pinned Deno as a Jupyter kernel, all inside the git-ignored
# .tools/jupyter/ (nothing system-wide, nothing in $HOME):
#
#   .tools/jupyter/site/                 nbconvert, nbclient, jupyter_client and their
#                                        dependencies (pip --target, every version pinned below,
#                                        --no-deps so pip installs exactly this list)
#   .tools/jupyter/share/jupyter/kernels/deno/kernel.json
#                                        `deno jupyter --install --name deno` of the pinned Deno
#   .tools/jupyter/jupyter               a wrapper: `jupyter` with PYTHONPATH, JUPYTER_PATH,
#                                        JUPYTER_DATA_DIR, JUPYTER_CONFIG_DIR and
#                                        JUPYTER_RUNTIME_DIR pointing into .tools/jupyter/
#
# No ipykernel: the Deno kernel is the pinned deno binary itself. Reuses an install whose
# pins, Python and Deno match. Prints the wrapper's path on success:
#
#   "$(bash scripts/install-jupyter.sh)" nbconvert --to notebook --execute examples/x.ipynb
#
# Exits non-zero with a clear message when PyPI cannot be reached. Needs python3 with pip.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.tools/jupyter"

# The whole dependency closure of nbconvert 7.17.2 (with nbclient and jupyter_client), as pip
# resolved it on Python 3.11; exact versions, binary wheels only.
PINS=(
  nbconvert==7.17.2
  nbclient==0.11.0
  jupyter_client==8.10.0
  jupyter_core==5.9.1
  nbformat==5.11.1
  traitlets==5.16.1
  pyzmq==27.3.0
  tornado==6.6.1
  python-dateutil==4.0.0
  tzdata==2026.6
  platformdirs==4.14.8
  packaging==26.4
  jinja2==3.1.6
  markupsafe==3.0.4
  mistune==3.4.0
  pygments==2.21.0
  jupyterlab_pygments==0.3.0
  pandocfilters==1.5.1
  defusedxml==0.7.1
  beautifulsoup4==4.15.0
  soupsieve==4.1.3
  typing_extensions==4.16.0
  bleach==6.4.0
  tinycss2==1.5.1
  webencodings==0.6.1
  fastjsonschema==2.22.3
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  referencing==0.37.0
  rpds-py==2026.9.1
  attrs==26.1.0
)

say() { printf 'install-jupyter: %s\n' "$*" >&2; }
die() { printf 'install-jupyter: error: %s\n' "$*" >&2; exit 1; }

PY=""
for c in python3 python; do command -v "$c" >/dev/null 2>&1 && { PY="$c"; break; }; done
[ -n "$PY" ] || die "python3 (with pip) is required to install nbconvert from PyPI"
# The real interpreter (not a pyenv shim): pyzmq and rpds-py are built for one Python ABI.
PY="$("$PY" -c 'import sys; print(sys.executable)')"
PY_VERSION="$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"

TOOLS_OUT="$(bash "$ROOT/scripts/bootstrap.sh")" || die "could not install the pinned deno (scripts/bootstrap.sh)"
DENO="$(printf '%s\n' "$TOOLS_OUT" | head -n1)"
DENO_VERSION="$("$DENO" --version | head -n1 | awk '{print $2}')"

KERNEL_DIR="$DIR/share/jupyter/kernels/deno"
WRAPPER="$DIR/jupyter"
STAMP="$DIR/versions"
WANT="python $PY_VERSION $PY; deno $DENO_VERSION $DENO; ${PINS[*]}"

# Fast path: everything present at the pinned versions, for this Python and this Deno.
if [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] && [ -x "$WRAPPER" ] && [ -f "$KERNEL_DIR/kernel.json" ]; then
  printf '%s\n' "$WRAPPER"
  exit 0
fi

mkdir -p "$DIR"
rm -f "$STAMP"

# 1. The Python packages, into a stage that replaces site/ only when pip succeeded.
if [ "$(cat "$DIR/site.versions" 2>/dev/null)" != "python $PY_VERSION $PY; ${PINS[*]}" ] \
  || [ ! -d "$DIR/site/nbconvert" ]; then
  say "installing nbconvert and its ${#PINS[@]} pinned dependencies from PyPI into $DIR/site (Python $PY_VERSION)"
  stage="$DIR/.site.tmp.$$"
  rm -rf "$stage"
  mkdir -p "$stage"
  if ! "$PY" -m pip install --disable-pip-version-check --no-input \
    --no-deps --only-binary=:all: --target "$stage" "${PINS[@]}" >"$stage.log" 2>&1; then
    cat "$stage.log" >&2
    rm -rf "$stage" "$stage.log"
    die "could not install nbconvert's pinned packages from PyPI (is the package index reachable? see pip's output above)"
  fi
  rm -f "$stage.log"
  got="$(PYTHONPATH="$stage" PYTHONNOUSERSITE=1 "$PY" -c 'import nbconvert, nbclient, jupyter_client; print(nbconvert.__version__, nbclient.__version__, jupyter_client.__version__)' 2>&1)" \
    || { rm -rf "$stage"; die "the installed nbconvert does not import: $got"; }
  [ "$got" = "7.17.2 0.11.0 8.10.0" ] || { rm -rf "$stage"; die "installed nbconvert/nbclient/jupyter_client are '$got'"; }
  rm -rf "$DIR/site"
  mv "$stage" "$DIR/site"
  printf '%s\n' "python $PY_VERSION $PY; ${PINS[*]}" >"$DIR/site.versions"
fi

# 2. The kernelspec. `deno jupyter --install` writes into the user's Jupyter data dir
# ($HOME/.local/share/jupyter; it ignores JUPYTER_DATA_DIR) unless DENO_TEST_JUPYTER_PATH
# names another, which is how it is kept inside .tools/ here. The spec's argv is the pinned
# deno binary's absolute path: [deno, "jupyter", "--kernel", "--conn", "{connection_file}"].
say "registering the Deno $DENO_VERSION kernel in $DIR/share/jupyter"
mkdir -p "$DIR/share/jupyter"
DENO_TEST_JUPYTER_PATH="$DIR/share/jupyter" DENO_NO_UPDATE_CHECK=1 \
  "$DENO" jupyter --install --name deno --display "Deno $DENO_VERSION (cflow)" --force >/dev/null 2>&1 \
  || die "deno jupyter --install failed"
[ -f "$KERNEL_DIR/kernel.json" ] || die "deno jupyter --install did not write $KERNEL_DIR/kernel.json (did DENO_TEST_JUPYTER_PATH stop working?)"
grep -qF "\"$DENO\"" "$KERNEL_DIR/kernel.json" || die "$KERNEL_DIR/kernel.json does not run $DENO"

# 3. The wrapper: `jupyter` with every Jupyter path inside .tools/jupyter/.
mkdir -p "$DIR/config"
cat >"$WRAPPER.tmp.$$" <<EOF
#!/usr/bin/env bash
# Written by scripts/install-jupyter.sh: jupyter (nbconvert, kernelspec, ...) from
# $DIR/site, with the Deno kernel registered in $DIR/share/jupyter.
export PYTHONPATH="$DIR/site"
export PYTHONNOUSERSITE=1
export PATH="$DIR/site/bin:\$PATH"
export JUPYTER_PATH="$DIR/share/jupyter"
export JUPYTER_DATA_DIR="$DIR/share/jupyter"
export JUPYTER_CONFIG_DIR="$DIR/config"
export JUPYTER_RUNTIME_DIR="\${JUPYTER_RUNTIME_DIR:-$DIR/runtime}"
export JUPYTER_PLATFORM_DIRS=1
export DENO_NO_UPDATE_CHECK=1
exec "$PY" -m jupyter "\$@"
EOF
chmod +x "$WRAPPER.tmp.$$"
mv "$WRAPPER.tmp.$$" "$WRAPPER"
"$WRAPPER" kernelspec list 2>/dev/null | grep -q "$KERNEL_DIR" \
  || die "jupyter does not see the Deno kernel in $KERNEL_DIR"

printf '%s\n' "$WANT" >"$STAMP.tmp.$$" && mv "$STAMP.tmp.$$" "$STAMP"
printf '%s\n' "$WRAPPER"
