/* Packed multi-head attention with attention dropout, forward and backward, for `benchbuild.zoo.attention.packed`.
 *
 * A call runs sequences first, first + step, first + 2·step, ..., each with all its heads, so that several threads
 * can share a batch (ctypes releases the GIL). A sequence writes only its own rows of the outputs and gradients (its
 * query rows, its keys' rows), so results do not depend on how sequences are spread over threads.
 *
 * Layout: the query of sequence b at position i is row query_starts[b] + i of `qa`, head h its columns
 * q_col + h·D .. + D; keys and values likewise in `ka` / `va`, rows key_starts[b] .. + key_lengths[b]. With
 * `causal`, query i sees keys 0 .. i. The output is (rows of qa, heads·D); lse holds each query's log-sum-exp of
 * its scaled scores, from which the backward pass recomputes the attention weights.
 *
 * Dropout: weight (row, h, j) is kept iff hash((row·heads + h)·longest + j) >= threshold, the hash being
 * benchbuild.zoo.dropout.HashMask's keyed lowbias32 (two rounds), so the mask is a function of the key alone.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HIDDEN (-1e30f) /* score of a key the query does not see: exp() of it minus the maximum is 0 */

static inline uint32_t lowbias32(uint32_t z) {
    z ^= z >> 16;
    z *= 0x7FEB352Du;
    z ^= z >> 15;
    z *= 0x846CA68Bu;
    z ^= z >> 16;
    return z;
}

static inline uint32_t uniform32(uint32_t i, uint32_t key_low, uint32_t key_high) {
    return lowbias32(lowbias32((i * 0x9E3779B9u) ^ key_low) ^ key_high);
}

static inline int64_t visible_keys(int64_t i, int64_t key_count, int causal) {
    return causal ? (i + 1 < key_count ? i + 1 : key_count) : key_count;
}

/* 8 floats, one AVX register; unaligned loads and stores go through memcpy. */
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

static inline v8 load8(const float *p) { v8 v; memcpy(&v, p, sizeof v); return v; }
static inline void store8(float *p, v8 v) { memcpy(p, &v, sizeof v); }
static inline v8 splat(float x) { return (v8){x, x, x, x, x, x, x, x}; }
static inline v8 max8(v8 a, v8 b) {
    const v8i greater = a > b; /* -1 where a > b */
    v8i ai, bi, chosen;
    memcpy(&ai, &a, sizeof a);
    memcpy(&bi, &b, sizeof b);
    chosen = (greater & ai) | (~greater & bi);
    v8 out;
    memcpy(&out, &chosen, sizeof out);
    return out;
}
static inline float sum8(v8 v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }

/* exp(x) for x <= 0 (a score minus its row's maximum), 8 at a time: 2^k · exp(r) with |r| <= ln2/2, exp(r) by its
 * degree-6 Taylor polynomial (relative error below 2e-7), 2^k through the exponent bits; exactly 0 below 2^-126
 * (so HIDDEN scores weigh nothing). */
static inline v8 exp8(v8 x) {
    v8 t = x * splat(1.44269504088896341f);
    t = max8(t, splat(-127.0f)) + splat(127.5f);
    const v8i k = __builtin_convertvector(t, v8i); /* t >= 0.5: truncation is floor */
    const v8 r = (t - __builtin_convertvector(k, v8) - splat(0.5f)) * splat(0.69314718055994531f);
    v8 p = splat(1.0f / 720);
    p = p * r + splat(1.0f / 120);
    p = p * r + splat(1.0f / 24);
    p = p * r + splat(1.0f / 6);
    p = p * r + splat(0.5f);
    p = p * r + splat(1.0f);
    p = p * r + splat(1.0f);
    const v8i bits = k << 23;
    v8 power;
    memcpy(&power, &bits, sizeof power);
    return p * power;
}

/* keys/values of one head: rows (width, D) and transposed (D, width), zero after `count`. */
static inline void load_head(const float *source, int64_t stride, int64_t start, int64_t count, int64_t col, int D,
                             int64_t width, float *restrict rows, float *restrict transposed) {
    memset(rows, 0, sizeof(float) * width * D);
    memset(transposed, 0, sizeof(float) * width * D);
    for (int64_t j = 0; j < count; j++) {
        const float *from = source + (start + j) * stride + col;
        for (int d = 0; d < D; d++) {
            rows[j * D + d] = from[d];
            transposed[d * width + j] = from[d];
        }
    }
}

/* scores[j] = Σ_d vector[d]·transposed[d, j] for j < width (a multiple of 8), HIDDEN from `visible` on. */
static inline void products(const float *restrict vector, const float *restrict transposed, int D, int64_t width,
                            int64_t visible, float *restrict scores) {
    for (int64_t block = 0; block < width; block += 8) {
        v8 acc = splat(0.0f);
        for (int d = 0; d < D; d++) acc += splat(vector[d]) * load8(transposed + d * width + block);
        store8(scores + block, acc);
    }
    for (int64_t j = visible; j < width; j++) scores[j] = HIDDEN;
}

/* weights[j] = exp(weights[j] - shift) in place; returns their sum. */
static inline float exponentiate(float *restrict weights, int64_t width, float shift) {
    v8 total = splat(0.0f);
    for (int64_t block = 0; block < width; block += 8) {
        const v8 e = exp8(load8(weights + block) - splat(shift));
        store8(weights + block, e);
        total += e;
    }
    return sum8(total);
}

static inline float maximum(const float *weights, int64_t width) {
    v8 top = load8(weights);
    for (int64_t block = 8; block < width; block += 8) {
        const v8 w = load8(weights + block);
        top = max8(w, top);
    }
    float best = top[0];
    for (int l = 1; l < 8; l++) best = top[l] > best ? top[l] : best;
    return best;
}

static inline void multipliers(float *restrict out, int64_t width, uint32_t base, uint32_t key_low,
                               uint32_t key_high, uint32_t threshold, float value) {
    for (int64_t j = 0; j < width; j++)
        out[j] = uniform32(base + (uint32_t)j, key_low, key_high) >= threshold ? value : 0.0f;
}

/* Ask for the cache lines of rows start .. start + count, columns col .. col + cols (the next sequence's), so
 * they arrive while this one is computed: rows lie a whole (tokens, ·) row apart, which hardware prefetchers miss. */
static inline void prefetch_rows(const float *a, int64_t stride, int64_t start, int64_t count, int64_t col,
                                 int64_t cols) {
    for (int64_t r = start; r < start + count; r++)
        for (int64_t c = 0; c < cols; c += 16) __builtin_prefetch(a + r * stride + col + c);
}

/* Prefetch the query, key and value rows (all heads) of sequence `next`, the one this thread computes after the
 * current one; the backward pass adds its output and output-gradient rows. */
static inline void prefetch_sequence(const float *qa, int64_t q_stride, int64_t q_col, const float *ka,
                                     int64_t k_stride, int64_t k_col, const float *va, int64_t v_stride, int64_t v_col,
                                     const int64_t *query_starts, const int64_t *query_lengths,
                                     const int64_t *key_starts, const int64_t *key_lengths, int64_t next, int64_t cols) {
    prefetch_rows(qa, q_stride, query_starts[next], query_lengths[next], q_col, cols);
    prefetch_rows(ka, k_stride, key_starts[next], key_lengths[next], k_col, cols);
    prefetch_rows(va, v_stride, key_starts[next], key_lengths[next], v_col, cols);
}

/* Keys are processed in whole blocks of 8. */
static inline int64_t block_width(int64_t key_count) { return key_count < 8 ? 8 : (key_count + 7) / 8 * 8; }

#define MAX_BLOCKS 32 /* head_dim <= 256 */

static inline __attribute__((always_inline)) void forward_body(
    const float *qa, int64_t q_stride, int64_t q_col, const float *ka, int64_t k_stride, int64_t k_col,
    const float *va, int64_t v_stride, int64_t v_col, float *restrict out, float *restrict lse,
    const int64_t *query_starts, const int64_t *query_lengths, const int64_t *key_starts, const int64_t *key_lengths,
    int64_t sequences, int causal, int heads, const int D, float scale, uint32_t key_low, uint32_t key_high,
    uint32_t threshold, float keep_scale, int64_t longest, int64_t first, int64_t step) {
    const int64_t max_width = (longest + 7) / 8 * 8;
    float *buffer = malloc(sizeof(float) * (4 * max_width * D + 2 * max_width + D));
    float *key_rows = buffer, *keys_t = key_rows + max_width * D, *values = keys_t + max_width * D;
    float *values_t = values + max_width * D, *weights = values_t + max_width * D, *kept = weights + max_width;
    float *query = kept + max_width;
    const int blocks = D / 8;
    /* A task is one sequence, all heads: its rows are read whole (heads side by side), once. */
    for (int64_t b = first; b < sequences; b += step) for (int64_t h = 0; h < heads; h++) {
        const int64_t q0 = query_starts[b], k0 = key_starts[b], key_count = key_lengths[b];
        const int64_t width = block_width(key_count);
        if (h == 0 && b + step < sequences) {
            const int64_t next = b + step;
            prefetch_sequence(qa, q_stride, q_col, ka, k_stride, k_col, va, v_stride, v_col, query_starts,
                              query_lengths, key_starts, key_lengths, next, heads * D);
        }
        load_head(ka, k_stride, k0, key_count, k_col + h * D, D, width, key_rows, keys_t);
        load_head(va, v_stride, k0, key_count, v_col + h * D, D, width, values, values_t);
        for (int64_t i = 0; i < query_lengths[b]; i++) {
            const int64_t row = q0 + i, visible = visible_keys(i, key_count, causal);
            float *o = out + row * heads * D + h * D;
            if (visible == 0) {
                for (int d = 0; d < D; d++) o[d] = 0.0f;
                lse[row * heads + h] = -INFINITY;
                continue;
            }
            for (int d = 0; d < D; d++) query[d] = qa[row * q_stride + q_col + h * D + d] * scale;
            products(query, keys_t, D, width, visible, weights);
            const float top = maximum(weights, width);
            const float total = exponentiate(weights, width, top);
            multipliers(kept, width, (uint32_t)((row * heads + h) * longest), key_low, key_high, threshold,
                        keep_scale / total);
            v8 output[MAX_BLOCKS];
            for (int c = 0; c < blocks; c++) output[c] = splat(0.0f);
            for (int64_t j = 0; j < visible; j++) {
                const v8 w = splat(weights[j] * kept[j]);
                for (int c = 0; c < blocks; c++) output[c] += w * load8(values + j * D + 8 * c);
            }
            for (int c = 0; c < blocks; c++) store8(o + 8 * c, output[c]);
            lse[row * heads + h] = top + logf(total);
        }
    }
    free(buffer);
}

static inline __attribute__((always_inline)) void backward_body(
    const float *qa, int64_t q_stride, int64_t q_col, const float *ka, int64_t k_stride, int64_t k_col,
    const float *va, int64_t v_stride, int64_t v_col, const float *out, const float *lse, const float *grad,
    float *dqa, float *dka, float *dva, const int64_t *query_starts, const int64_t *query_lengths,
    const int64_t *key_starts, const int64_t *key_lengths, int64_t sequences, int causal, int heads, const int D,
    float scale, uint32_t key_low, uint32_t key_high, uint32_t threshold, float keep_scale, int64_t longest,
    int64_t first, int64_t step) {
    const int64_t max_width = (longest + 7) / 8 * 8;
    float *buffer = malloc(sizeof(float) * (6 * max_width * D + 3 * max_width + 2 * D));
    float *key_rows = buffer, *keys_t = key_rows + max_width * D, *values = keys_t + max_width * D;
    float *values_t = values + max_width * D, *d_keys = values_t + max_width * D, *d_values = d_keys + max_width * D;
    float *weights = d_values + max_width * D, *kept = weights + max_width, *d_weights = kept + max_width;
    float *query = d_weights + max_width, *d_output = query + D;
    const int blocks = D / 8;
    /* A task is one sequence, all heads: its rows are read whole (heads side by side), once. */
    for (int64_t b = first; b < sequences; b += step) for (int64_t h = 0; h < heads; h++) {
        const int64_t q0 = query_starts[b], k0 = key_starts[b], key_count = key_lengths[b];
        const int64_t width = block_width(key_count);
        if (h == 0 && b + step < sequences) {
            const int64_t next = b + step;
            prefetch_sequence(qa, q_stride, q_col, ka, k_stride, k_col, va, v_stride, v_col, query_starts,
                              query_lengths, key_starts, key_lengths, next, heads * D);
            prefetch_rows(out, heads * D, query_starts[next], query_lengths[next], 0, heads * D);
            prefetch_rows(grad, heads * D, query_starts[next], query_lengths[next], 0, heads * D);
        }
        load_head(ka, k_stride, k0, key_count, k_col + h * D, D, width, key_rows, keys_t);
        load_head(va, v_stride, k0, key_count, v_col + h * D, D, width, values, values_t);
        memset(d_keys, 0, sizeof(float) * width * D);
        memset(d_values, 0, sizeof(float) * width * D);
        for (int64_t i = 0; i < query_lengths[b]; i++) {
            const int64_t row = q0 + i, visible = visible_keys(i, key_count, causal);
            float *dq = dqa + row * q_stride + q_col + h * D;
            if (visible == 0) {
                for (int d = 0; d < D; d++) dq[d] = 0.0f;
                continue;
            }
            float row_term = 0.0f; /* Σ_j p_j · dL/dp_j = dO · O */
            for (int d = 0; d < D; d++) {
                query[d] = qa[row * q_stride + q_col + h * D + d] * scale;
                d_output[d] = grad[row * heads * D + h * D + d];
                row_term += d_output[d] * out[row * heads * D + h * D + d];
            }
            products(query, keys_t, D, width, visible, weights);
            exponentiate(weights, width, lse[row * heads + h]); /* p_j, 0 where not visible */
            products(d_output, values_t, D, width, width, d_weights); /* dL/d(dropped p_j) */
            multipliers(kept, width, (uint32_t)((row * heads + h) * longest), key_low, key_high, threshold,
                        keep_scale);
            for (int64_t j = 0; j < width; j++) {
                d_weights[j] = weights[j] * (d_weights[j] * kept[j] - row_term) * scale; /* dL/d(q·k_j) */
                weights[j] *= kept[j];
            }
            v8 q[MAX_BLOCKS], g[MAX_BLOCKS], d_query[MAX_BLOCKS];
            for (int c = 0; c < blocks; c++) {
                q[c] = load8(query + 8 * c) * splat(1.0f / scale);
                g[c] = load8(d_output + 8 * c);
                d_query[c] = splat(0.0f);
            }
            for (int64_t j = 0; j < visible; j++) {
                const v8 w = splat(weights[j]), ds = splat(d_weights[j]);
                for (int c = 0; c < blocks; c++) {
                    store8(d_values + j * D + 8 * c, load8(d_values + j * D + 8 * c) + w * g[c]);
                    store8(d_keys + j * D + 8 * c, load8(d_keys + j * D + 8 * c) + ds * q[c]);
                    d_query[c] += ds * load8(key_rows + j * D + 8 * c);
                }
            }
            for (int c = 0; c < blocks; c++) store8(dq + 8 * c, d_query[c]);
        }
        for (int64_t j = 0; j < key_count; j++) {
            for (int d = 0; d < D; d++) {
                dka[(k0 + j) * k_stride + k_col + h * D + d] = d_keys[j * D + d];
                dva[(k0 + j) * v_stride + v_col + h * D + d] = d_values[j * D + d];
            }
        }
    }
    free(buffer);
}

#define FORWARD_ARGS qa, q_stride, q_col, ka, k_stride, k_col, va, v_stride, v_col, out, lse, query_starts, \
    query_lengths, key_starts, key_lengths, sequences, causal, heads
#define FORWARD_TAIL scale, key_low, key_high, threshold, keep_scale, longest, first, step
/* Head sizes known at compile time let the compiler unroll the loops over dimensions; other multiples of 8 (up to
 * 256) take the general body. */
#define BY_HEAD_SIZE(body, ARGS)                                                                                      \
    switch (head_dim) {                                                                                               \
    case 8: body(ARGS, 8, FORWARD_TAIL); break;                                                                       \
    case 16: body(ARGS, 16, FORWARD_TAIL); break;                                                                     \
    case 32: body(ARGS, 32, FORWARD_TAIL); break;                                                                     \
    case 64: body(ARGS, 64, FORWARD_TAIL); break;                                                                     \
    default: body(ARGS, head_dim, FORWARD_TAIL);                                                                      \
    }

void attention_forward(const float *qa, int64_t q_stride, int64_t q_col, const float *ka, int64_t k_stride,
                       int64_t k_col, const float *va, int64_t v_stride, int64_t v_col, float *out, float *lse,
                       const int64_t *query_starts, const int64_t *query_lengths, const int64_t *key_starts,
                       const int64_t *key_lengths, int64_t sequences, int causal, int heads, int head_dim,
                       float scale, uint32_t key_low, uint32_t key_high, uint32_t threshold, float keep_scale,
                       int64_t longest, int64_t first, int64_t step) {
    BY_HEAD_SIZE(forward_body, FORWARD_ARGS)
}

#define BACKWARD_ARGS qa, q_stride, q_col, ka, k_stride, k_col, va, v_stride, v_col, out, lse, grad, dqa, dka, dva, \
    query_starts, query_lengths, key_starts, key_lengths, sequences, causal, heads

void attention_backward(const float *qa, int64_t q_stride, int64_t q_col, const float *ka, int64_t k_stride,
                        int64_t k_col, const float *va, int64_t v_stride, int64_t v_col, const float *out,
                        const float *lse, const float *grad, float *dqa, float *dka, float *dva,
                        const int64_t *query_starts, const int64_t *query_lengths, const int64_t *key_starts,
                        const int64_t *key_lengths, int64_t sequences, int causal, int heads, int head_dim,
                        float scale, uint32_t key_low, uint32_t key_high, uint32_t threshold, float keep_scale,
                        int64_t longest, int64_t first, int64_t step) {
    BY_HEAD_SIZE(backward_body, BACKWARD_ARGS)
}
