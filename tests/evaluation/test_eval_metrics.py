import math

import pytest

from benchbuild.metrics import bleu, bleu_by_degree, bleu_tokenizer_for, chrf, exact_match


def test_exact_match_is_sequence_accuracy_up_to_whitespace():
    assert exact_match(["I_JUMP  I_WALK", "I_RUN", "I_LOOK"], ["I_JUMP I_WALK", "I_RUN I_RUN", " I_LOOK"]) == \
        pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
        exact_match(["a", "b"], ["a"])


def test_bleu_equals_the_geometric_mean_of_hand_counted_precisions():
    # 1- to 4-gram matches 6/7, 5/6, 4/5, 3/4; equal lengths, so no brevity penalty.
    score = bleu(["the cat sat on the mat today"], ["the cat sat on the mat yesterday"])
    assert score["score"] == pytest.approx(100 * (6 / 7 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25)
    assert score["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")


def test_identical_outputs_score_100_and_chinese_references_use_the_zh_tokenizer():
    references = ["他喜欢的狗想要一些新朋友。", "每天，狗都会在公园里玩耍。"]
    assert bleu_tokenizer_for(references) == "zh"
    assert "tok:zh" in bleu(references, references)["signature"]
    assert bleu(references, references)["score"] == pytest.approx(100)
    assert chrf(references, references)["score"] == pytest.approx(100)
    assert chrf(["abc"], ["xyz"])["score"] == 0
    assert "nc:6|nw:0" in chrf(references, references)["signature"]


def test_bleu_by_degree_cuts_equal_count_buckets_and_states_their_edges():
    references = ["a b c d e", "f g h i j", "k l m n o", "p q r s t", "u v w x y", "z y x w v"]
    predictions = ["a b c d e", "f g h i j", "nothing", "nothing", "u v w x y", "z y x w v"]
    degrees = [0.9, 0.1, 0.5, 0.4, 0.2, 0.8]
    buckets = bleu_by_degree(predictions, references, degrees, buckets=3)
    assert [(b["degree_min"], b["degree_max"], b["rows"]) for b in buckets] == [(0.1, 0.2, 2), (0.4, 0.5, 2),
                                                                                (0.8, 0.9, 2)]
    assert [round(b["bleu"], 6) for b in buckets] == [100.0, 0.0, 100.0]
    assert not math.isnan(buckets[1]["bleu"])


def test_exact_match_of_no_rows_is_zero():
    assert exact_match([], []) == 0.0


def test_the_zh_tokenizer_needs_more_than_half_of_the_references_in_chinese():
    assert bleu_tokenizer_for(["他喜欢狗。", "the dog"]) == "13a"  # one of two: not more than half
    assert bleu_tokenizer_for(["他喜欢狗。", "狗在公园。", "the dog"]) == "zh"


def test_bleu_by_degree_makes_five_buckets_by_default_and_keeps_a_one_row_bucket():
    rows = [f"w{row} x{row} y{row} z{row}" for row in range(5)]
    buckets = bleu_by_degree(rows, rows, [0.1, 0.2, 0.3, 0.4, 0.5])
    assert [bucket["rows"] for bucket in buckets] == [1, 1, 1, 1, 1]
    assert [bucket["bleu"] for bucket in buckets] == pytest.approx([100.0] * 5)


def test_bleu_by_degree_scores_chinese_buckets_with_the_zh_tokenizer():
    # Unsegmented Chinese: 13a sees each line as one token and gives 0 for a near miss; zh scores characters.
    references = ["他喜欢的狗想要一些新朋友", "每天狗都会在公园里玩耍"]
    predictions = ["他喜欢的狗想要一些朋友", "每天狗都会在公园玩耍"]
    buckets = bleu_by_degree(predictions, references, [1.0, 1.0], buckets=1)
    assert buckets[0]["bleu"] == pytest.approx(bleu(predictions, references, tokenize="zh")["score"])
    assert buckets[0]["bleu"] > 50.0


def test_bleu_by_degree_puts_tied_degrees_in_row_order():
    # 40 rows of one degree: a stable sort keeps them in row order, so the first bucket holds rows 0-19 (all right)
    # and the second rows 20-39 (all wrong); an unstable sort would mix them.
    references = [f"a{row} b{row} c{row} d{row}" for row in range(40)]
    predictions = references[:20] + ["x y z w"] * 20
    buckets = bleu_by_degree(predictions, references, [2.0] * 40, buckets=2)
    assert [bucket["bleu"] for bucket in buckets] == pytest.approx([100.0, 0.0])
