"""The packed CPU backend: attention over a whole grouped training batch in one compiled call, dropout included.

In a grouped training step (`layouts.Groups`) each length group would attend on its own: per group, head layout
copies, two batched products of tiny matrices (tens of keys of 16 dimensions), a mask, a softmax and dropout, each
a separate torch call, forward and backward. On 2 cores that was half of a SCAN training step (measured by
replacing it), nearly all per-call overhead and tiny-matrix inefficiency. Here a small C kernel
(`packed_kernel.c`) runs every (sequence, head) pair of the batch, reading queries, keys and values straight from
the projections' outputs (column blocks of them) and writing the layout the output projection reads. The
backward kernel recomputes the attention weights from each query's saved log-sum-exp (as FlashAttention does) and
takes the softmax's row term from dO·O. Threads split the sequences (ctypes releases the GIL), each writing only
its own rows, so results do not depend on the thread count.

The attention dropout mask is a `hash_masks.HashMask` of each weight's index
((query row · heads + head) · longest key count + key position), keyed by one draw from torch's generator: a
function of torch's RNG state alone, recomputed in the backward pass rather than stored (`attention_keep_mask`
returns it).

The kernel is compiled with the system's C compiler (`$CC`, else `cc`) at first use, for this CPU
(`-march=native`), into `$BENCHBUILD_KERNEL_CACHE` (default `~/.cache/benchbuild/kernels`), keyed by the source,
the compiler and the CPU. Without a compiler, `available()` is False and `choose_backend` picks another backend
(with one warning); `BENCHBUILD_PACKED_ATTENTION=0` turns it off by choice. Only what the SCAN Transformer needs is
here: float32 content attention without position terms, optionally causal, over the first `key_lengths[b]` keys of
sequence b, heads of a multiple of 8 dimensions (`takes`), at most 2³² weights per call (`fits`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import math
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.attention.layouts import SequenceLayout
from benchbuild.zoo.attention.hash_masks import HashMask, keep_mask

SOURCE = Path(__file__).with_name("packed_kernel.c")
ENABLED_VARIABLE = "BENCHBUILD_PACKED_ATTENTION"  # "0" turns the kernel off (another backend attends)
FLAGS = ("-O3", "-march=native", "-ffast-math", "-fno-finite-math-only", "-fPIC", "-shared")
_MAX_WEIGHTS = 2**32  # weight indices are hashed as 32-bit words


def _cache_dir() -> Path:
    """`$BENCHBUILD_KERNEL_CACHE`, else `~/.cache/benchbuild/kernels`; where that folder cannot be made (HOME a file, a
    read-only home), one of this user's in the system's temporary folder, so that the kernel, and with it the same
    training, does not depend on HOME."""
    configured = os.environ.get("BENCHBUILD_KERNEL_CACHE")
    try:
        preferred = Path(configured) if configured else Path.home() / ".cache" / "benchbuild" / "kernels"
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred
    except (OSError, RuntimeError):  # RuntimeError: Path.home() without HOME or a passwd entry
        return Path(tempfile.gettempdir()) / f"benchbuild-kernels-{os.getuid()}"


_why_off: list[str] = []  # why the kernel could not be built, for `path_in_words`


def _cpu_signature() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        flags = platform.processor()
    return platform.machine() + flags


def build(compiler: str, cache_dir: Path) -> Path | None:
    """The kernel compiled by `compiler` (a command, possibly with options, as in `$CC`) for this CPU under
    `cache_dir`, reused when already built; None, with a warning saying why, when it cannot be built."""
    key = hashlib.sha256(b"\0".join([SOURCE.read_bytes(), compiler.encode(), " ".join(FLAGS).encode(),
                                     _cpu_signature().encode()])).hexdigest()[:16]
    target = cache_dir / f"attention-{key}.so"
    if target.is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            built = Path(tmp) / target.name
            result = subprocess.run([*shlex.split(compiler), *FLAGS, "-o", str(built), str(SOURCE), "-lm"],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise OSError(result.stderr.strip()[:300] or f"{compiler} exited with {result.returncode}")
            os.replace(built, target)  # atomic: processes building at once each rename a whole library
    except OSError as error:
        _why_off.append(f"{SOURCE.name} could not be built ({' '.join(str(error).split())[:120]})")
        warnings.warn(f"benchbuild: could not compile {SOURCE.name} with {compiler} ({error}); grouped training "
                      "attends group by group instead (slower, and with other dropout masks: another training than "
                      "with the kernel, which run.json records). Set CC to a working C compiler to fix this.")
        return None
    return target


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    """The compiled kernel, built on first use (None when it cannot be built)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        warnings.warn("benchbuild: no C compiler found, so grouped training attends group by group (slower, and "
                      "with other dropout masks: another training than with the kernel, which run.json records); "
                      "install one or set CC")
        return None
    path = build(compiler, _cache_dir())
    if path is None:
        return None
    library = ctypes.CDLL(str(path))
    i64, f32, u32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_uint32, ctypes.c_void_p
    tail = [i64, ctypes.c_int, ctypes.c_int, ctypes.c_int, f32, u32, u32, u32, f32, i64, i64, i64]
    head = [ptr, i64, i64, ptr, i64, i64, ptr, i64, i64]
    library.attention_forward.argtypes = head + [ptr, ptr, ptr, ptr, ptr, ptr] + tail
    library.attention_backward.argtypes = head + [ptr] * 10 + tail
    library.attention_forward.restype = library.attention_backward.restype = None
    return library


def available() -> bool:
    """Whether the compiled kernel is on (`$BENCHBUILD_PACKED_ATTENTION` is not "0") and can be used on this machine
    (compiles it on first call)."""
    return os.environ.get(ENABLED_VARIABLE, "1") != "0" and _library() is not None


def path_in_words() -> str:
    """Which attention computation grouped CPU training runs on this machine, as run.json's environment records it:
    "compiled kernel", or why not ("off: BENCHBUILD_PACKED_ATTENTION=0", "off: no working C compiler"). The two paths
    draw other dropout masks, so a run trained on one is another computation than on the other: `reproduce` names a
    difference."""
    if os.environ.get(ENABLED_VARIABLE, "1") == "0":
        return f"off: {ENABLED_VARIABLE}=0"
    if _library() is not None:
        return "compiled kernel"
    return f"off: {_why_off[-1]}" if _why_off else "off: no C compiler found"


@contextlib.contextmanager
def disabled():
    """Within the block the kernel is off: `choose_backend` picks another backend (for comparisons)."""
    previous = os.environ.get(ENABLED_VARIABLE)
    os.environ[ENABLED_VARIABLE] = "0"
    try:
        yield
    finally:
        if previous is None:
            del os.environ[ENABLED_VARIABLE]
        else:
            os.environ[ENABLED_VARIABLE] = previous


@functools.lru_cache(maxsize=4)
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="benchbuild-attention")


def _run(function, *arguments) -> None:
    """`function(*arguments, first, step)` over all tasks, split over torch's thread count."""
    threads = max(1, torch.get_num_threads())
    if threads == 1:
        function(*arguments, 0, 1)
        return
    futures = [_pool(threads).submit(function, *arguments, first, threads) for first in range(threads)]
    for future in futures:
        future.result()


def _pointer(t: torch.Tensor) -> int:
    return t.data_ptr()


class _PackedAttention(torch.autograd.Function):
    """Heads of `queries` (column block `q_col` of a (tokens, ·) tensor) attend over keys and values, column blocks
    `k_col` / `v_col` of `keys_values` (of `queries` itself when that is None: self-attention from one fused
    projection); returns (query tokens, heads · head_dim)."""

    @staticmethod
    def forward(ctx, queries, keys_values, q_col, k_col, v_col, heads, head_dim, layout, p):
        mask = HashMask.draw(p) if p > 0 else HashMask(0.0, 0)  # no draw from torch's generator when none drops
        source = queries if keys_values is None else keys_values
        out = torch.zeros(queries.size(0), heads * head_dim, dtype=queries.dtype)
        lse = torch.empty(queries.size(0), heads, dtype=queries.dtype)
        settings = (layout.sequences, int(layout.causal), heads, head_dim, 1.0 / math.sqrt(head_dim),
                    int(mask.key_low), int(mask.key_high), int(mask.threshold), 1.0 / (1.0 - p), layout.longest_keys)
        _run(_library().attention_forward, _pointer(queries), queries.size(1), q_col, _pointer(source),
             source.size(1), k_col, _pointer(source), source.size(1), v_col, _pointer(out), _pointer(lse),
             *_layout_pointers(layout), *settings)
        ctx.save_for_backward(queries, source, out, lse)
        ctx.self_attention = keys_values is None
        ctx.columns, ctx.layout, ctx.settings = (q_col, k_col, v_col), layout, settings
        return out

    @staticmethod
    def backward(ctx, grad):
        queries, source, out, lse = ctx.saved_tensors
        q_col, k_col, v_col = ctx.columns
        grad = grad.contiguous()
        d_queries = torch.zeros_like(queries)
        d_source = d_queries if ctx.self_attention else torch.zeros_like(source)
        _run(_library().attention_backward, _pointer(queries), queries.size(1), q_col, _pointer(source),
             source.size(1), k_col, _pointer(source), source.size(1), v_col, _pointer(out), _pointer(lse),
             _pointer(grad), _pointer(d_queries), _pointer(d_source), _pointer(d_source),
             *_layout_pointers(ctx.layout), *ctx.settings)
        return d_queries, None if ctx.self_attention else d_source, None, None, None, None, None, None, None


def _layout_pointers(layout: SequenceLayout) -> list[int]:
    return [array.ctypes.data for array in (layout.query_starts, layout.query_lengths, layout.key_starts,
                                            layout.key_lengths)]


def takes(dtype: torch.dtype, head_dim: int) -> bool:
    """Whether the kernel computes heads of `head_dim` dimensions in `dtype` here: float32, a multiple of 8 up to
    256, and the kernel on and built (compiled at the first call that gets this far)."""
    return dtype == torch.float32 and head_dim % 8 == 0 and 0 < head_dim <= 256 and available()


def fits(rows: int, heads: int, longest_keys: int) -> bool:
    """Whether the weight indices of `rows` queries in `heads` heads over at most `longest_keys` keys fit the mask's
    32-bit words."""
    return rows * heads * max(longest_keys, 1) < _MAX_WEIGHTS


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SequenceLayout,
           dropout_p: float) -> torch.Tensor:
    """`benchbuild.zoo.attention.attend` over a packed batch: heads q (1, H, query tokens, head_dim) and k, v
    (1, H, key tokens, head_dim), each sequence's rows where `layout` says; (1, query tokens, H · head_dim).

    The kernel reads q, k and v in place where they are column blocks of one (tokens, ·) tensor (the fused
    projection they were cut from) and writes their gradients into it; other inputs are copied first.
    """
    queries, q_col = _columns(q)
    keys, k_col = _columns(k)
    values, v_col = _columns(v)
    if keys is not values:
        keys, k_col, v_col = torch.cat([_flat(k), _flat(v)], dim=1), 0, k.size(1) * k.size(3)
    _require_library()
    keys_values = None if keys is queries else keys
    return _PackedAttention.apply(queries, keys_values, q_col, k_col, v_col, q.size(1), q.size(3), layout,
                                  dropout_p)[None]


def _require_library() -> None:
    if _library() is None:
        raise BenchbuildError("packed attention needs its C kernel, which could not be built here (see the warning); "
                              "ask `choose_backend` first and attend another way when it says no")


def _flat(heads: torch.Tensor) -> torch.Tensor:
    """(tokens, H · head_dim) of head-split (1, H, tokens, head_dim)."""
    return heads[0].transpose(0, 1).reshape(heads.size(2), -1)


def _columns(heads: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A contiguous (tokens, ·) tensor holding head-split `heads` (1, H, tokens, head_dim) as a block of columns,
    and the block's first column: the tensor `heads` is a view of when it is one, else a copy."""
    base = heads._base
    if (base is not None and base.dim() == 2 and base.is_contiguous() and heads.size(2) == base.size(0)
            and heads.stride()[1:] == (heads.size(3), base.stride(0), 1)):
        return base, heads.storage_offset() - base.storage_offset()
    return _flat(heads).contiguous(), 0


def attend_projections(queries: torch.Tensor, keys_values: torch.Tensor | None, layout: SequenceLayout, heads: int,
                       dropout_p: float = 0.0) -> torch.Tensor:
    """Multi-head attention of every sequence in `layout` from fused projections: (query tokens, d),
    d = heads · head_dim.

    Self-attention: `queries` is a fused (tokens, 3d) projection (queries, keys, values) and `keys_values` None;
    cross-attention: `queries` is (query tokens, d) and `keys_values` (key tokens, 2d) (keys, then values).
    Attention weights are dropped with probability `dropout_p` (pass 0 outside training); kept ones are scaled by
    1 / (1 - p). Rows of `queries` that no sequence covers come out as zeros.
    """
    _require_library()
    d = queries.size(1) // 3 if keys_values is None else keys_values.size(1) // 2
    k_col, v_col = (d, 2 * d) if keys_values is None else (0, d)
    queries = queries.contiguous()
    keys_values = keys_values.contiguous() if keys_values is not None else None
    return _PackedAttention.apply(queries, keys_values, 0, k_col, v_col, heads, d // heads, layout, dropout_p)


def attention_keep_mask(layout: SequenceLayout, rows: int, heads: int, p: float) -> torch.Tensor:
    """(rows, heads, longest key count) booleans: whether the kernel would keep weight (row, head, key) when called
    from the same RNG state (weight j of query row r in head h)."""
    return keep_mask((rows, heads, layout.longest_keys), p)
