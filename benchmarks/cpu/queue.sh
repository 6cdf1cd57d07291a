#!/usr/bin/env bash
# The CPU queue's background runs (benchmarks/cpu/QUEUE.md): one thread each, nice 19, detached (setsid) so that
# they outlive the shell; resumable (a rerun of `start` with the same item and seed resumes from the run's last
# checkpoint or resume point). At most two at once on a 2-core machine; pause them for any timing or test run.
#
#   bash benchmarks/cpu/queue.sh start ITEM SEED   ITEM: sa-jump sa-simple sa-turn-left sa-length lstm-jump lstm-simple
#                                                        lstm-turn-left lstm-length t000-simple t000-around-right
#                                                        ut-cutoff26 rut-cutoff26 t5-prototype-jump sa-mt
#   bash benchmarks/cpu/queue.sh chain ITEM SEED [SEED...]   one slot: the seeds one after another, each scored
#                                                        (`eval`, into runs/queue/ITEM/seedN.eval.txt) as it ends;
#                                                        a finished and scored seed is skipped, a stop ends the chain
#   bash benchmarks/cpu/queue.sh pause | resume | status | stop
#   bash benchmarks/cpu/queue.sh eval ITEM SEED    score the run on test (and, for 002's SCAN models, on train: its exclusion rule, and how well the run fits its own rows)
#   bash benchmarks/cpu/queue.sh start ref002-jump SEED [EPOCHS]   002's own train_test.py (../shared/reference), one
#                                                        epoch of addprim_jump (11,736 updates; or EPOCHS, each
#                                                        followed by its train/validation/test accuracy), its loss
#                                                        logged at every update
#   bash benchmarks/cpu/queue.sh start sa-actions-jump SEED   ours, 11,736 updates with 002's loss over the actions
#                                                        alone (benchmarks/sa_action_loss.py); sa-vocabulary-jump:
#                                                        the same with ours (its paired control)
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/../.."
BIN=${BIN:-.venv/bin}
OUT=${QUEUE_OUT:-runs/queue}

item() {  # ITEM -> "model recipe split extra-flags"
    case "$1" in
        sa-jump) echo "syntactic_attention scan addprim_jump --stop-when-settled" ;;
        sa-simple) echo "syntactic_attention scan simple --stop-when-settled" ;;
        sa-turn-left) echo "syntactic_attention scan addprim_turn_left --stop-when-settled" ;;
        sa-length) echo "syntactic_attention scan length --stop-when-settled" ;;
        lstm-jump) echo "lstm_attention scan addprim_jump" ;;
        lstm-simple) echo "lstm_attention scan simple" ;;
        lstm-turn-left) echo "lstm_attention scan addprim_turn_left" ;;
        lstm-length) echo "lstm_attention scan length" ;;
        t000-simple) echo "transformer scan_000 simple" ;;
        t000-around-right) echo "transformer scan_000 template_around_right" ;;
        ut-cutoff26) echo "universal_transformer scan length_cutoff_26" ;;
        rut-cutoff26) echo "relative_universal_transformer scan length_cutoff_26" ;;
        sa-mt) echo "syntactic_attention mt lake-baroni-002" ;;
        t5-prototype-jump) echo "sag_t5 scan addprim_jump --max-steps 4000 --set architecture={head_width=\"model\",attention_sublayer=\"prototype\",t5_bias_init=\"normal\"}" ;;
        *) echo "queue.sh: unknown item '$1' (see benchmarks/cpu/QUEUE.md)" >&2; exit 2 ;;
    esac
}

# 002's own code, run as it is, beside ours: does a seed of theirs train as often as ours (benchmarks/cpu/QUEUE.md)?
# An item's data: a SCAN split built under out/scan, or lake-baroni-002, 002's English-French files imported
# (`benchbuild import syntactic_attention_mt`) into out/lake-baroni-002.
data_of() {  # SPLIT -> the benchmark folder, built or imported when missing
    if [ "$1" = lake-baroni-002 ]; then
        [ -d out/lake-baroni-002 ] || "$BIN/benchbuild" import syntactic_attention_mt \
            ../shared/reference/syntactic_attention/data/MT --out out/lake-baroni-002 >/dev/null
        echo out/lake-baroni-002
    else
        "$BIN/benchbuild" build-scan --out out/scan --split "$1" >/dev/null
        echo "out/scan/$1"
    fi
}

reference_002() {  # SEED [EPOCHS]: one epoch by default; with EPOCHS, that many, validated and tested after each
    local ref run root epochs="${2:-1}" every=5
    [[ "$epochs" =~ ^[1-9][0-9]*$ ]] || { echo "queue.sh: EPOCHS must be a whole number of at least 1, got '$epochs'" >&2; exit 2; }
    ref="$(cd ../shared/reference/syntactic_attention && pwd)"
    root="$(pwd)"
    run="$root/$OUT/ref002-jump/seed$1"
    if [ -n "${2:-}" ]; then run="$run-${epochs}epochs"; every=1; fi
    mkdir -p "$run/work/data/SCAN" "$run/results"
    ln -sf "$(cd ../shared/data/scan/add_prim_split && pwd)"/tasks_*_addprim_jump.txt "$run/work/data/SCAN/"
    (cd "$run/work" && OMP_NUM_THREADS=1 setsid nohup bash -c \
        'echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' queue "$root/$BIN/python" \
        "$ref/train_test.py" --seed "$1" --num_iters $((11736 * epochs)) --checkpoint_every "$every" \
        --record_loss_every 1 --load_vocab_json "$ref/vocab.json" --results_dir out --out_data_file "seed$1.json" \
        >>"$run.log" 2>&1 &)
    echo "started ref002-jump seed $1 ($epochs epochs): $run (log $run.log)"
}

# Only the queue's own processes: `benchbuild train` whose --out lies under $OUT (never a test suite's), 002's
# train_test.py, benchmarks/sa_action_loss.py.
signal_all() {  # SIGNAL
    [ "$1" = TERM ] && { pkill -TERM -f "queue.sh _chain " || true; }  # first, so that no chain starts its next seed
    pkill "-$1" -f "benchbuild train .*--out $OUT/" || true
    pkill "-$1" -f "benchbuild eval --run $OUT/" || true
    pkill "-$1" -f "reference/syntactic_attention/train_test.py" || true
    pkill "-$1" -f "benchmarks/sa_action_loss.py" || true
}

detached() {  # COMMAND...: in the background past this shell, one thread, nice 19 (its autogroup too: nice alone
    # does not lower a process against another autogroup's under the kernel's scheduler; benchmarks/RESULTS.md,
    # "Test suite")
    (OMP_NUM_THREADS=1 setsid nohup bash -c 'echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' \
        queue "$@" &)
}

train() {  # ITEM SEED: `benchbuild train` in this process (resumes from the run's last checkpoint or resume point)
    local model recipe split flags data
    read -r model recipe split flags <<<"$(item "$1")"
    data="$(data_of "$split")"
    mkdir -p "$OUT/$1"
    "$BIN/benchbuild" train --model "$model" --recipe "$recipe" --data "$data" --out "$OUT/$1/seed$2" \
        --seed "$2" --device cpu $flags
}

complete() {  # RUN: whether its run.json says the training finished
    grep -q '"status": "complete"' "$1/run.json" 2>/dev/null
}

case "${1:-status}" in
    _chain)  # ITEM SEED...: (what `chain` runs in the background)
        chain_item="$2"; shift 2
        for seed in "$@"; do
            run="$OUT/$chain_item/seed$seed"
            if ! complete "$run"; then
                echo "chain: $chain_item seed $seed: training ($(date -u +%FT%TZ))" >>"$run.log"
                train "$chain_item" "$seed" >>"$run.log" 2>&1 || {
                    echo "chain: $chain_item seed $seed stopped; the chain ends ($(date -u +%FT%TZ))" >>"$run.log"; exit 1; }
            fi
            # (scored again when the run is newer than its scores: a retrained seed never keeps an old run's figures)
            if [ ! -s "$run.eval.txt" ] || [ "$run/run.json" -nt "$run.eval.txt" ]; then
                bash "$SELF" eval "$chain_item" "$seed" >"$run.eval.tmp" 2>&1 || {
                    echo "chain: $chain_item seed $seed: eval failed (see $run.eval.tmp)" >>"$run.log"; exit 1; }
                mv "$run.eval.tmp" "$run.eval.txt"
            fi
            echo "chain: $chain_item seed $seed: done, scored in $run.eval.txt ($(date -u +%FT%TZ))" >>"$run.log"
        done ;;
    chain)
        [ $# -ge 3 ] || { echo "usage: queue.sh chain ITEM SEED [SEED...]" >&2; exit 2; }
        item "$2" >/dev/null
        for seed in "${@:3}"; do
            [[ "$seed" =~ ^[0-9]+$ ]] || { echo "queue.sh: a seed is a whole number, got '$seed'" >&2; exit 2; }
        done
        mkdir -p "$OUT/$2"
        detached bash "$SELF" _chain "${@:2}"
        echo "started a chain of $2 seeds ${*:3} (logs $OUT/$2/seedN.log; scores $OUT/$2/seedN.eval.txt)" ;;
    start)
        [ $# -ge 3 ] || { echo "usage: queue.sh start ITEM SEED" >&2; exit 2; }
        if [ "$2" = ref002-jump ]; then reference_002 "$3" "${4:-}"; exit 0; fi
        if [ "$2" = sa-actions-jump ] || [ "$2" = sa-vocabulary-jump ]; then
            loss="${2#sa-}"; loss="${loss%-jump}"
            "$BIN/benchbuild" build-scan --out out/scan --split addprim_jump >/dev/null
            run="$OUT/$2/seed$3"
            mkdir -p "$OUT/$2"
            (OMP_NUM_THREADS=1 setsid nohup bash -c 'echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' \
                queue "$BIN/python" benchmarks/sa_action_loss.py --data out/scan/addprim_jump --seed "$3" \
                --steps 11736 --loss "$loss" --out "$run" >>"$run.log" 2>&1 &)
            echo "started $2 seed $3: $run (log $run.log)"; exit 0
        fi
        [ $# -eq 3 ] || { echo "usage: queue.sh start ITEM SEED" >&2; exit 2; }
        item "$2" >/dev/null
        run="$OUT/$2/seed$3"
        mkdir -p "$OUT/$2"
        detached bash "$SELF" _chain "$2" "$3"  # a chain of one seed: trained, then scored into $run.eval.txt
        echo "started $2 seed $3: $run (log $run.log; scored into $run.eval.txt when it ends)" ;;
    eval)
        [ $# -eq 3 ] || { echo "usage: queue.sh eval ITEM SEED" >&2; exit 2; }
        read -r model recipe split flags <<<"$(item "$2")"
        run="$OUT/$2/seed$3"
        data="$(data_of "$split")"
        OMP_NUM_THREADS=1 "$BIN/benchbuild" eval --run "$run" --data "$data" --device cpu
        if { [ "$model" = syntactic_attention ] || [ "$model" = lstm_attention ]; } && [ "$recipe" = scan ]; then
            OMP_NUM_THREADS=1 "$BIN/benchbuild" eval --run "$run" --data "$data" --split train --device cpu \
                --out "$run/train-eval"
        fi
        if [ "$2" != t5-prototype-jump ]; then  # (its 4,000 steps are a variant's, for RESULTS.md, not the ledger)
            echo "the run's record for benchbuild/ledger.toml (add a note on what the numbers alone do not say):"
            "$BIN/python" tools/ledger_run.py "$run"
        fi ;;
    # (002's own code and the action-loss experiment: they do not resume; a stopped one starts again)
    pause) signal_all STOP; echo paused ;;
    resume) signal_all CONT; echo resumed ;;
    stop) signal_all TERM; signal_all CONT  # a paused run acts on its TERM once it runs again
          echo "stopped (each of ours saves a resume point; the experiments start again)" ;;
    status)
        for log in "$OUT"/*/seed*.log; do
            [ -e "$log" ] || continue
            printf '%s: %s\n' "${log%.log}" "$(tr '\r' '\n' <"$log" | grep -v '^$' | tail -n 1 | cut -c1-110)"
        done ;;
    *) echo "usage: queue.sh start ITEM SEED | chain ITEM SEED... | eval ITEM SEED | pause | resume | stop | status" >&2
       exit 2 ;;
esac
