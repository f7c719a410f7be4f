"""The clock-free counts the benchmarks share (swarmlab/bench.py): FLOPs of a call and the activation bytes a forward
keeps for its backward, checked against hand counts."""

import torch
import torch.nn.functional as F

from swarmlab.bench import count_flops, saved_activation_bytes


def test_count_flops_of_a_linear_layer_is_two_per_multiply_add():
    layer = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64)
    assert count_flops(lambda: layer(x)) == 2 * 8 * 64 * 32


def test_count_flops_counts_the_cpu_flash_attention_kernel_as_the_math_path():
    q, k, v = (torch.randn(2, 4, 128, 16) for _ in range(3))
    expected = 2 * (2 * 2 * 4 * 128 * 128 * 16)  # q k^T and p v
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        assert count_flops(lambda: F.scaled_dot_product_attention(q, k, v)) == expected
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        assert count_flops(lambda: F.scaled_dot_product_attention(q, k, v)) == expected


def test_saved_activation_bytes_counts_each_kept_buffer_once_without_the_parameters():
    layer = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64, requires_grad=True)  # so that the matmul keeps its weight too, for x's gradient

    def forward():
        h = torch.relu(layer(x))  # the matmul keeps x (and its weight, excluded); relu keeps its output
        return (h * h.view(8, 32)).sum()  # h twice, one buffer

    assert saved_activation_bytes(forward, exclude=layer.parameters()) == 4 * (8 * 64 + 8 * 32)
    assert saved_activation_bytes(forward) == 4 * (8 * 64 + 8 * 32 + 64 * 32)  # with the weight


def test_saved_activation_bytes_is_zero_without_autograd():
    layer = torch.nn.Linear(64, 32)
    with torch.no_grad():
        assert saved_activation_bytes(lambda: layer(torch.randn(8, 64))) == 0
