"""Separate source and target dictionaries (fairseq's default, recipe key `dictionaries = "separate"`): an IWSLT-style
run keeps a German and an English dictionary of one jointly learned BPE, saves both and decodes with the English one;
CoGnition's Chinese is segmented with jieba before BPE while English words stay whole; FUSION then has 004's 48M
parameters; a joint recipe builds what it built before; Dangle, which embeds source and target with one embedding,
refuses separate dictionaries."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch
from small_inputs import write_benchmark
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from benchbuild.errors import BenchbuildError
from benchbuild.run_folder import TARGET_TOKENIZER_DIR, save_pretrained
from benchbuild.training.loop import _network, train
from benchbuild.training.plan import run_tokenizer
from benchbuild.zoo.recipe import resolve_recipe
from benchbuild.training.tokenization import bpe_tokenizer, build_dictionaries, build_tokenizer
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.catalogue import resolved_architecture
from benchbuild.zoo.decoding import row_limits
from benchbuild.zoo.loading import (SEGMENT_BOUNDARY, TranslationTokenizer, jieba_segmented, load_model,
                                    load_tokenizer, segmentation_of)

RECIPE = {"batch_size": 8, "learning_rate": 2e-3, "steps": 4, "eval_every": 4, "bpe_vocab_size": 300}


def lines(path, count):
    return path.read_text(encoding="utf-8").splitlines()[:count]


@pytest.fixture(scope="module")
def german_english(shared_data):
    react = shared_data / "react"
    return lines(react / "valid.de", 600), lines(react / "valid.en", 600)


@pytest.fixture(scope="module")
def english_chinese(shared_data):
    cognition = shared_data / "cognition"
    return lines(cognition / "cg-test.en", 1500), lines(cognition / "cg-test.zh", 1500)


@pytest.fixture(scope="module")
def iwslt_run(german_english, tiny_model, tmp_path_factory):
    """A tiny De-En run with separate dictionaries (4 steps), evaluated on its test rows."""
    from benchbuild.evaluation.evaluate import evaluate_run

    german, english = german_english
    rows = [{"id": f"r-{i}", "source": german[i], "target": english[i]} for i in range(60)]
    folder = tmp_path_factory.mktemp("iwslt")
    benchmark = write_benchmark(folder / "bench", {"train": rows[:50], "test": rows[50:]}, "react", "react/tiny")
    train(tiny_model, benchmark, folder / "run", device="cpu", progress=False,
          overrides={**RECIPE, "dictionaries": "separate"})
    metrics = evaluate_run(folder / "run", benchmark, device="cpu")
    return folder / "run", rows, metrics


def test_an_iwslt_style_run_embeds_sources_and_targets_in_dictionaries_of_their_own(iwslt_run):
    run_dir, rows, _ = iwslt_run
    tokenizer = load_tokenizer(run_dir)
    assert isinstance(tokenizer, TranslationTokenizer)
    source, target = tokenizer.source, tokenizer.target
    assert len(source) != len(target)
    model = load_model(run_dir)
    assert model.config.source_vocab_size == len(source) and model.config.vocab_size == len(target)
    assert model.source_embedding.weight.shape == (len(source), 32)
    assert model.embedding.weight.shape == (len(target), 32)  # decoder inputs and the tied output layer
    # The German dictionary holds German pieces, the English one English pieces: each lacks some of the other's.
    german = {piece for row in rows[:50] for piece in source.tokenize(row["source"])}
    english = {piece for row in rows[:50] for piece in target.tokenize(row["target"])}
    assert german <= set(source.get_vocab()) and english <= set(target.get_vocab())
    assert german - set(target.get_vocab()) and english - set(source.get_vocab())
    card = (run_dir / "README.md").read_text()  # the model card names both dictionaries and their sizes
    assert (f"separate dictionaries, built from the training split: {len(source):,} source tokens (BPE) for the "
            f"encoder, {len(target):,} target tokens (BPE) for the decoder") in card


def test_the_run_folder_holds_the_source_dictionary_at_its_root_and_the_target_one_beside_it(iwslt_run):
    run_dir, rows, _ = iwslt_run
    tokenizer = load_tokenizer(run_dir)
    assert (run_dir / TARGET_TOKENIZER_DIR / "tokenizer.json").is_file()
    plain = AutoTokenizer.from_pretrained(run_dir)  # what transformers loads from a run folder: the source one
    sources = [row["source"] for row in rows[:5]]
    assert plain(sources)["input_ids"] == tokenizer(sources)["input_ids"]
    targets = [row["target"] for row in rows[:5]]
    english = AutoTokenizer.from_pretrained(run_dir / TARGET_TOKENIZER_DIR)
    assert english(targets)["input_ids"] == tokenizer(text_target=targets)["input_ids"]
    assert tokenizer(text_target=targets)["input_ids"] != plain(targets)["input_ids"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["identity"]["recipe"]["dictionaries"] == "separate"


def test_eval_decodes_the_models_outputs_with_the_target_dictionary(iwslt_run):
    run_dir, rows, metrics = iwslt_run
    tokenizer, model = load_tokenizer(run_dir), load_model(run_dir)
    test = rows[50:]
    predictions = [json.loads(line)["prediction"] for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    encoded = tokenizer([row["source"] for row in test], return_tensors="pt", padding=True)
    generated = model.generate(**encoded, do_sample=False, num_beams=1, max_new_tokens=metrics["max_new_tokens"],
                               decoder_start_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                               pad_token_id=tokenizer.pad_token_id)
    # eval cuts each row at its own reference + 8 target tokens (`decoding.row_limits`), after the start token
    assert metrics["max_new_tokens_per_row"] == "its reference + 8"
    limits = row_limits(tokenizer.target, [row["target"] for row in test])
    generated = [ids[:1 + limit] for ids, limit in zip(generated, limits)]
    in_english = [" ".join(text.split()) for text in tokenizer.target.batch_decode(generated, skip_special_tokens=True)]
    in_german = [" ".join(text.split()) for text in tokenizer.source.batch_decode(generated, skip_special_tokens=True)]
    assert predictions == in_english and predictions != in_german
    assert metrics["rows"] == 10


def test_each_side_keeps_the_pieces_of_the_jointly_learned_bpe_and_only_its_own(german_english):
    """prepare-iwslt14.sh learns one BPE on German and English together; fairseq-preprocess then builds a dictionary
    per side from that side's BPE'd text."""
    german, english = german_english
    joint = bpe_tokenizer(german + english, 800)
    separate = build_dictionaries(german, english, source_kind="bpe", target_kind="bpe", bpe_vocab_size=800)

    def pieces(tokenizer, ids):
        return [tokenizer.convert_ids_to_tokens(row) for row in ids]

    assert pieces(separate.source, separate(german)["input_ids"]) == pieces(joint, joint(german)["input_ids"])
    assert pieces(separate.target, separate(text_target=english)["input_ids"]) == pieces(
        joint, joint(english)["input_ids"])
    assert len(separate.source) < len(joint) and len(separate.target) < len(joint)
    assert separate.batch_decode(separate(text_target=english[:20])["input_ids"], skip_special_tokens=True) == \
        english[:20]
    # The same texts give the same dictionaries.
    again = build_dictionaries(german, english, source_kind="bpe", target_kind="bpe", bpe_vocab_size=800)
    assert again.source.get_vocab() == separate.source.get_vocab()
    assert again.target.get_vocab() == separate.target.get_vocab()


def test_jieba_segmentation_is_deterministic_and_only_marks_where_words_meet(english_chinese):
    _, chinese = english_chinese
    assert jieba_segmented("狗把他自己的车给了他。").split(SEGMENT_BOUNDARY) == [
        "狗", "把", "他", "自己", "的", "车", "给", "了", "他", "。"]
    segmented = [jieba_segmented(text) for text in chinese[:300]]
    assert [text.replace(SEGMENT_BOUNDARY, "") for text in segmented] == chinese[:300]
    # Spaces of pre-segmented text (CoGnition's train and valid .zh) stay; no boundary sits beside one.
    assert jieba_segmented("当 她 奶奶 开车 回家 时") == "当 她 奶奶 开车 回家 时"
    code = ("import sys\nfrom benchbuild.zoo.loading import jieba_segmented\n"
            "sys.stdout.write('\\n'.join(jieba_segmented(line) for line in sys.stdin.read().split('\\n')))")
    other_process = subprocess.run([sys.executable, "-c", code], input="\n".join(chinese[:300]), capture_output=True,
                                   text=True, check=True, encoding="utf-8").stdout
    assert other_process.split("\n") == segmented


def test_chinese_is_segmented_before_bpe_on_the_target_side_only_and_english_words_stay_whole(english_chinese):
    english, chinese = english_chinese
    dictionaries = build_dictionaries(english, chinese, source_kind="word", target_kind="bpe", bpe_vocab_size=1500,
                                      segment_target="jieba")
    assert segmentation_of(dictionaries.source) is None and segmentation_of(dictionaries.target) == "jieba"
    for text, ids in zip(english[:200], dictionaries(english[:200])["input_ids"]):
        assert dictionaries.source.convert_ids_to_tokens(ids) == [*text.split(), "</s>"]
    assert len(dictionaries.source) == 4 + len({word for text in english for word in text.split()})

    def crosses_a_word(pieces_of_lines, texts):
        """Whether a piece spans the boundary of two jieba words."""
        for pieces, text in zip(pieces_of_lines, texts):
            boundaries, position = set(), 0
            for word in jieba_segmented(text).split(SEGMENT_BOUNDARY):
                position += len(word)
                boundaries.add(position)
            position = 0
            for piece in pieces[:-1]:  # </s>
                start, position = position, position + len(piece.lstrip("▁"))
                if any(start < boundary < position for boundary in boundaries):
                    return True
        return False

    ids = dictionaries(text_target=chinese)["input_ids"]
    assert not crosses_a_word([dictionaries.target.convert_ids_to_tokens(row) for row in ids], chinese)
    unsegmented = bpe_tokenizer(chinese, 1500)  # the same BPE on raw Chinese merges across words
    assert crosses_a_word([unsegmented.convert_ids_to_tokens(row) for row in unsegmented(chinese)["input_ids"]],
                          chinese)
    # Boundaries are no spaces: the target dictionary decodes Chinese as it was written (so references stay
    # producible for validation's exact match).
    assert dictionaries.batch_decode(ids, skip_special_tokens=True) == chinese


def test_a_cognition_style_run_segments_its_chinese_targets_and_gives_them_back_as_written(english_chinese,
                                                                                           tiny_model, tmp_path):
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.validation import teacher_forced

    english, chinese = english_chinese
    rows = [{"id": f"c-{i}", "source": english[i], "target": chinese[i]} for i in range(60)]
    benchmark = write_benchmark(tmp_path / "bench", {"train": rows[:50], "test": rows[50:]}, "cognition", "tiny")
    train(tiny_model, benchmark, tmp_path / "run", device="cpu", progress=False, max_steps=2, overrides={
        **RECIPE, "dictionaries": "separate", "source_tokens": "word", "target_tokens": "bpe",
        "segment_target": "jieba"})
    config = json.loads((tmp_path / "run" / TARGET_TOKENIZER_DIR / "tokenizer_config.json").read_text())
    assert config["segmentation"] == "jieba"
    assert "segmentation" not in json.loads((tmp_path / "run" / "tokenizer_config.json").read_text())
    tokenizer, model = load_tokenizer(tmp_path / "run"), load_model(tmp_path / "run")
    sources, targets = [row["source"] for row in rows[:50]], [row["target"] for row in rows[:50]]
    # Every training reference decodes back as written (test rows may hold characters training never saw), so
    # validation's exact match can count it.
    assert all(producible for batch in teacher_forced(model, tokenizer, sources, targets) for producible in
               batch.producible)
    evaluate_run(tmp_path / "run", benchmark, device="cpu")
    predictions = [json.loads(line)["prediction"] for line in (tmp_path / "run" / "predictions.jsonl").open()]
    assert len(predictions) == 10 and not any(SEGMENT_BOUNDARY in prediction for prediction in predictions)


def test_fusion_has_004s_48m_parameters_with_the_dictionaries_of_its_recipe():
    fusion = load_entry("fusion")
    recipe = resolve_recipe(fusion.recipes, "mt")
    assert (recipe.dictionaries, recipe.source_tokenizer_kind, recipe.target_tokenizer_kind, recipe.segment_target,
            recipe.bpe_vocab_size) == ("separate", "word", "bpe", "jieba", 5500)
    entry = dataclasses.replace(fusion, architecture=resolved_architecture(fusion, "mt"))

    def parameters(overrides=None):
        with torch.device("meta"):
            network = build_model(entry, vocab_size=5500, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                  overrides=overrides)
        return sum(parameter.numel() for parameter in network.parameters())

    # 004 §3.1: Chinese (target) BPE of 5,500 subwords, English (source) words, "the small vocabulary (i.e., 2000)".
    assert parameters({"source_vocab_size": 2000}) == pytest.approx(48_000_000, rel=0.01)
    assert parameters() != pytest.approx(48_000_000, rel=0.01)  # one joint 5.5k vocabulary: 46.98M


def test_the_iwslt_recipe_keeps_separate_dictionaries():
    recipe = resolve_recipe(load_entry("transformer").recipes, "mt")
    assert (recipe.dictionaries, recipe.source_tokenizer_kind, recipe.target_tokenizer_kind) == (
        "separate", "bpe", "bpe")


def test_a_joint_recipe_builds_the_tokenizer_and_model_it_built_before(german_english, tiny_model, tmp_path):
    german, english = german_english
    train_split = [{"source": de, "target": en} for de, en in zip(german[:200], english[:200])]
    recipe = resolve_recipe({"mt": RECIPE}, "mt")
    tokenizer = run_tokenizer(train_split, recipe)
    save_pretrained(tmp_path, tokenizer)  # as `prepare` saves it in the run folder
    before = build_tokenizer([text for row in train_split for text in (row["source"], row["target"])], "bpe", 300)
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert tokenizer.backend_tokenizer.to_str() == before.backend_tokenizer.to_str()
    assert not (tmp_path / TARGET_TOKENIZER_DIR).exists()
    entry = load_entry(tiny_model)
    network = _network(entry, tokenizer, None, None)
    assert network.source_embedding is None and network.config.source_vocab_size is None
    assert sorted(network.state_dict()) == sorted(build_model(
        entry, vocab_size=len(before), pad_token_id=0, bos_token_id=1, eos_token_id=2).state_dict())


def test_separate_dictionaries_refuse_dangle_which_embeds_source_and_target_with_one_embedding():
    from benchbuild.zoo.dangle import DangleConfig, DangleForSeq2Seq

    small = dict(d_model=16, num_heads=2, d_ff=32, adaptive_layers=1, source_layers=1, decoder_layers=1,
                 vocab_size=30)
    DangleForSeq2Seq(DangleConfig(**small))  # one vocabulary: builds
    with pytest.raises(BenchbuildError, match=r"^dangle: separate source and target dictionaries .* train it with "
                                              r"--set dictionaries=joint$"):
        DangleForSeq2Seq(DangleConfig(**small, source_vocab_size=20))


def test_source_vocab_size_comes_from_the_dictionaries_not_from_the_architecture(tiny_model, german_english):
    german, english = german_english
    dictionaries = build_dictionaries(german[:100], english[:100], source_kind="word", target_kind="word")
    entry = load_entry(tiny_model)
    network = _network(entry, dictionaries, None, None)
    assert network.source_embedding.weight.shape[0] == len(dictionaries.source)
    with pytest.raises(BenchbuildError, match="source_vocab_size is the run's source dictionary's size"):
        _network(entry, dictionaries, None, {"source_vocab_size": 7})


@pytest.mark.parametrize("keys, message", [
    ({"source_tokens": "word"}, "one joint dictionary tokenizes both sides alike: set dictionaries = 'separate'"),
    ({"segment_target": "jieba"}, "segments one side only: set dictionaries = 'separate'"),
    ({"dictionaries": "separate", "target_tokens": "word", "segment_target": "jieba"},
     "needs 'target_tokens' = 'bpe'"),
    ({"dictionaries": "separate", "bpe_vocab_size": None, "source_tokens": "bpe"}, "needs `bpe_vocab_size`"),
])
def test_a_recipe_naming_dictionaries_that_cannot_be_built_is_refused(keys, message):
    with pytest.raises(BenchbuildError, match=message):
        resolve_recipe({"mt": {**RECIPE, **keys}}, "mt")


def test_saving_replaces_a_link_planted_where_the_target_dictionary_goes(german_english, tmp_path):
    german, english = german_english
    dictionaries = build_dictionaries(german[:50], english[:50], source_kind="word", target_kind="word")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / TARGET_TOKENIZER_DIR).symlink_to(elsewhere, target_is_directory=True)
    save_pretrained(run_dir, dictionaries)
    assert not (run_dir / TARGET_TOKENIZER_DIR).is_symlink() and not any(elsewhere.iterdir())
    assert load_tokenizer(run_dir).get_vocab() == dictionaries.target.get_vocab()
    save_pretrained(run_dir, dictionaries)  # a second save over the first
    assert load_tokenizer(run_dir).source.get_vocab() == dictionaries.source.get_vocab()


def test_train_refuses_separate_dictionaries_for_dangle_before_writing_anything(tmp_path):
    from commands import benchbuild, refused
    from small_inputs import word_lines, write_benchmark

    rows = [{"id": str(i), "source": line, "target": line} for i, line in enumerate(word_lines(20))]
    data = write_benchmark(tmp_path / "bench", {"train": rows, "test": rows[:4]}, "generic", "toy")
    done = benchbuild("train", "--model", "dangle", "--data", data, "--out", tmp_path / "run", "--set",
                      "dictionaries=separate", "--set", "bpe_vocab_size=40")
    refused(done, "dangle: separate source and target dictionaries", "--set dictionaries=joint")
    assert not (tmp_path / "run").exists()  # so the corrected rerun needs no --overwrite


def test_token_ids_read_from_the_encodings_are_what_each_tokenizers_own_call_gives(german_english, english_chinese,
                                                                                 shared_data):
    """`token_ids` skips transformers' call for speed: on SCAN's word-level dictionary, a joint De-En BPE, separate
    De-En dictionaries and CoGnition's jieba-segmented Chinese BPE (texts with words and characters the dictionary
    never saw among them), it gives the call's ids; a tokenizer left padding by a padded call goes through the call
    and still gives unpadded ids."""
    from benchbuild.zoo.loading import token_ids

    german, english = german_english
    chinese_english, chinese = english_chinese
    scan = [line.split(" OUT: ")[0].removeprefix("IN: ") for line in
            lines(shared_data / "scan" / "add_prim_split" / "tasks_train_addprim_turn_left.txt", 300)]
    cases = [
        (build_tokenizer(scan[:200], "word"), scan, scan),
        (bpe_tokenizer(german[:400] + english[:400], 500), german, english),
        (build_dictionaries(german[:400], english[:400], source_kind="bpe", target_kind="bpe", bpe_vocab_size=500),
         german, english),
        (build_dictionaries(chinese_english[:1000], chinese[:1000], source_kind="word", target_kind="bpe",
                            bpe_vocab_size=1500, segment_target="jieba"), chinese_english, chinese),
    ]
    for tokenizer, sources, targets in cases:
        assert token_ids(tokenizer, sources) == tokenizer(sources)["input_ids"]
        assert token_ids(tokenizer, targets, target=True) == tokenizer(text_target=targets)["input_ids"]
    joint = cases[1][0]
    joint(german[:3], padding=True)  # transformers leaves the backend padding after a padded call
    assert token_ids(joint, german[:50]) == [joint(text)["input_ids"] for text in german[:50]]
    chinese_side = cases[3][0]
    chinese_side.target(["中"], padding=True)
    assert token_ids(chinese_side, chinese[:50], target=True) == chinese_side(text_target=chinese[:50])["input_ids"]
