#!/usr/bin/env bash
# Unpack the source trees of PyPI packages the venv does not install, as fresh `--code-roots` for build_prompts.py's
# stub sets (the venv's own site-packages fed runs 8-23). Pinned, so a rebuild finds the same functions; only the
# Python source files are read (the compiled parts of the platform wheels are never imported). Sets:
#   run24  16 packages, 15,295 stubs no earlier set had (run 24; ~300 MB unpacked)
#   run25  24 more, for the next run (none of them in run24's set or the venv)
#
#   bash benchmarks/smollm2/package_roots.sh /tmp/roots24 run24
#   python benchmarks/smollm2/build_prompts.py --sharegpt-wheel WHEEL --chat 0 --code 0 --math 0 \
#       --doctest-stubs 100000 --code-stubs 100000 --method-stubs 100000 --private-stubs 100000 \
#       --code-roots /tmp/roots24/* --exclude stage_q/prompts.jsonl.xz stage_r22/prompts.jsonl.xz \
#       stage_r23/prompts.jsonl.xz --out /tmp/p24_new.jsonl
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OUT_DIR run24|run25 (one folder per package is unpacked in OUT_DIR)" >&2; exit 2; }
OUT=$1
case "$2" in
run24)
    PACKAGES=(astropy==8.0.2 babel==2.19.0 boltons==26.2.0 django==5.2.19 docutils==0.23.1 funcy==2.1 humanize==4.17.0
              inflect==7.6.0 more-itertools==11.2.1 nltk==3.10.4 pandas==3.1.1 pydash==8.1.0 scipy==1.17.1
              sqlalchemy==2.1.9 toolz==1.2.0 werkzeug==3.1.9) ;;
run25)
    PACKAGES=(arrow==1.4.0 attrs==26.1.0 beautifulsoup4==4.15.0 biopython==1.88 cachetools==8.0.2 dask==2026.8.0
              decorator==5.3.1 faker==40.63.0 flask==3.1.3 glom==25.12.0 html5lib==1.1 jsonschema==4.26.0
              markdown==3.11.3 marshmallow==4.4.0 pint==0.25.3 requests==2.34.2 scikit-learn==1.9.1
              statsmodels==0.15.0 tomlkit==0.15.3 tornado==6.6.1 twisted==26.10.0 urllib3==2.8.0 wrapt==2.5.2
              xarray==2026.9.0) ;;
*)
    echo "$0: no package set '$2' (run24 or run25)" >&2; exit 2 ;;
esac
PY=${PY:-$(dirname "$0")/../../.venv/bin/python}
WH=$(mktemp -d)
trap 'rm -rf "$WH"' EXIT
"$PY" -m pip download -q --no-deps --only-binary=:all: -d "$WH" "${PACKAGES[@]}"
mkdir -p "$OUT"
for wheel in "$WH"/*.whl; do
    name=$(basename "$wheel" | cut -d- -f1)
    rm -rf "${OUT:?}/$name" && "$PY" -m zipfile -e "$wheel" "$OUT/$name"
done
ls "$OUT" | tr '\n' ' '; echo
