#!/usr/bin/env bash
# Unpack the source trees of PyPI packages the venv does not install, as fresh `--code-roots` for build_prompts.py's
# stub sets (run 24: 15,295 stubs no earlier set had, from documented functions and methods of these 16 packages;
# the venv's own site-packages fed runs 8-23). Pinned, so a rebuild finds the same functions; pure Python files are
# all that is read (the compiled parts of the platform wheels are never imported). ~1 minute, ~300 MB unpacked.
#
#   bash benchmarks/smollm2/package_roots.sh /tmp/roots24
#   python benchmarks/smollm2/build_prompts.py --sharegpt-wheel WHEEL --chat 0 --code 0 --math 0 \
#       --doctest-stubs 100000 --code-stubs 100000 --method-stubs 100000 --private-stubs 100000 \
#       --code-roots /tmp/roots24/* --exclude stage_q/prompts.jsonl.xz stage_r22/prompts.jsonl.xz \
#       stage_r23/prompts.jsonl.xz --out /tmp/p24_new.jsonl
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR (one folder per package is unpacked there)" >&2; exit 2; }
OUT=$1
PY=${PY:-$(dirname "$0")/../../.venv/bin/python}
WH=$(mktemp -d)
trap 'rm -rf "$WH"' EXIT
PACKAGES=(astropy==8.0.2 babel==2.19.0 boltons==26.2.0 django==5.2.19 docutils==0.23.1 funcy==2.1 humanize==4.17.0
          inflect==7.6.0 more-itertools==11.2.1 nltk==3.10.4 pandas==3.1.1 pydash==8.1.0 scipy==1.17.1
          sqlalchemy==2.1.9 toolz==1.2.0 werkzeug==3.1.9)
"$PY" -m pip download -q --no-deps --only-binary=:all: -d "$WH" "${PACKAGES[@]}"
mkdir -p "$OUT"
for wheel in "$WH"/*.whl; do
    name=$(basename "$wheel" | cut -d- -f1)
    rm -rf "${OUT:?}/$name" && "$PY" -m zipfile -e "$wheel" "$OUT/$name"
done
ls "$OUT" | tr '\n' ' '; echo
