"""The zoo's CPU dropout: the drop rate, the scaling and reproducibility."""

from __future__ import annotations

import pytest
import torch

from benchbuild.zoo.attention.hash_masks import HashMask, dropout, keep_mask
from benchbuild.zoo.dropout import Dropout, dropout_add, relu_dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_mask_drops_a_fraction_p_of_independent_elements(p):
    torch.manual_seed(0)
    first, second = keep_mask((1000, 1000), p).float(), keep_mask((1000, 1000), p).float()
    assert abs(1.0 - first.mean().item() - p) < 0.002
    # neighbouring elements of one mask, and the same element in two masks, must not be correlated
    flat = first.view(-1)
    assert abs((flat[:-1] * flat[1:]).mean().item() - (1 - p) ** 2) < 0.003
    assert abs((first * second).mean().item() - (1 - p) ** 2) < 0.003


def test_the_mask_does_not_depend_on_the_number_of_threads():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        torch.manual_seed(4)
        one = keep_mask((300, 301), 0.1)
        torch.set_num_threads(2)
        torch.manual_seed(4)
        two = keep_mask((300, 301), 0.1)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)


def test_dropout_scales_kept_elements_passes_gradients_and_is_the_identity_outside_training():
    x = (torch.rand(64, 33) + 1.0).requires_grad_()
    torch.manual_seed(3)
    y = dropout(x, 0.25, True)
    torch.manual_seed(3)
    kept = keep_mask(x.shape, 0.25)
    assert torch.equal(y, torch.where(kept, x * (1 / 0.75), 0.0))
    y.sum().backward()
    assert torch.equal(x.grad, kept.float() / 0.75)
    module = Dropout(0.25).eval()
    assert module(x) is x and dropout(x, 0.0, True) is x


def test_dropout_added_to_a_residual_equals_the_sum_with_the_same_mask():
    residual = torch.randn(40, 17, requires_grad=True)
    x = torch.randn(40, 17, requires_grad=True)
    torch.manual_seed(8)
    fused = dropout_add(residual, x, 0.3, True)
    torch.manual_seed(8)
    kept = keep_mask(x.shape, 0.3)
    torch.testing.assert_close(fused, residual + torch.where(kept, x / 0.7, 0.0), rtol=0, atol=1e-6)
    fused.backward(torch.ones_like(fused))
    assert torch.equal(residual.grad, torch.ones_like(residual))
    assert torch.equal(x.grad, kept.float() / 0.7)


def test_dropout_after_relu_equals_the_two_in_turn_in_values_and_gradients():
    x = torch.randn(64, 33, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(64, 33, dtype=torch.float64)
    torch.manual_seed(9)
    fused = relu_dropout(x, 0.2, True)
    (fused_grad,) = torch.autograd.grad(fused, x, upstream)
    torch.manual_seed(9)
    reference = dropout(torch.relu(x), 0.2, True)
    (reference_grad,) = torch.autograd.grad(reference, x, upstream)
    assert torch.equal(fused, reference) and torch.equal(fused_grad, reference_grad)
    assert (fused == 0).float().mean().item() > 0.5  # negative inputs and dropped ones


def test_same_seed_same_mask_and_the_global_generator_advances():
    torch.manual_seed(11)
    first, second = keep_mask((50, 50), 0.1), keep_mask((50, 50), 0.1)
    torch.manual_seed(11)
    assert torch.equal(keep_mask((50, 50), 0.1), first) and not torch.equal(first, second)


def test_a_hash_mask_of_p_0_keeps_everything_and_draws_nothing():
    torch.manual_seed(2)
    mask = HashMask(0.0, 0)
    after = torch.rand(1)
    torch.manual_seed(2)
    assert torch.equal(after, torch.rand(1))
    x = torch.randn(40, 30)
    assert torch.equal(mask.apply(x), x)


def test_a_drawn_hash_mask_is_the_mask_keep_mask_draws():
    x = torch.ones(60, 70)
    torch.manual_seed(9)
    applied = HashMask.draw(0.25).apply(x)
    torch.manual_seed(9)
    assert torch.equal(applied != 0, keep_mask(x.shape, 0.25))
