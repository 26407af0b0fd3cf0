//! The float kernels of a variant (kernels.zig): RMS norm, softmax,
//! argmax, RoPE (from angles or from a table of them), the gated
//! activations (SiLU and GELU with glibc's expf, vectorized bit for bit),
//! and the streaming read the benchmarks use as their bandwidth yardstick.
//! Compiled once per variant like kernels.zig, at its vector width.

const std = @import("std");
const abi = @import("abi.zig");
const kernels = @import("kernels.zig");

const assert = std.debug.assert;
const lanes = kernels.lanes;
const exp = kernels.exp;
const maxNoNan = kernels.maxNoNan;
const maxLaneNoNan = kernels.maxLaneNoNan;

fn sumSquares(x: []const f32) f32 {
    const V = @Vector(lanes, f32);
    var acc0: V = @splat(0);
    var acc1: V = @splat(0);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + 2 * lanes <= x.len) : (i += 2 * lanes) {
            const a: V = x[i..][0..lanes].*;
            const b: V = x[i + lanes ..][0..lanes].*;
            acc0 = @mulAdd(V, a, a, acc0);
            acc1 = @mulAdd(V, b, b, acc1);
        }
    }
    var s: f32 = @reduce(.Add, acc0 + acc1);
    while (i < x.len) : (i += 1) s += x[i] * x[i];
    return s;
}

/// out = x / sqrt(mean(x^2) + eps) * weight.
pub fn rmsNorm(x: []const f32, weight: []const f32, eps: f32, out: []f32) void {
    assert(x.len > 0);
    assert(weight.len == x.len and out.len == x.len);
    const n: f32 = @floatFromInt(x.len);
    const scale: f32 = 1.0 / @sqrt(sumSquares(x) / n + eps);
    const V = @Vector(lanes, f32);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + lanes <= x.len) : (i += lanes) {
            const v: V = x[i..][0..lanes].*;
            const g: V = weight[i..][0..lanes].*;
            out[i..][0..lanes].* = v * @as(V, @splat(scale)) * g;
        }
    }
    while (i < x.len) : (i += 1) out[i] = x[i] * scale * weight[i];
}

/// In-place softmax. -inf entries (masked) become 0. Returns false, leaving
/// x unchanged, if x holds a NaN or +inf or is entirely -inf.
pub fn softmax(x: []f32) bool {
    assert(x.len > 0);
    var m: f32 = -std.math.inf(f32);
    for (x) |v| {
        if (std.math.isNan(v) or std.math.isPositiveInf(v)) return false;
        m = @max(m, v);
    }
    if (std.math.isNegativeInf(m)) return false;
    var sum: f64 = 0;
    for (x) |*v| {
        const e = exp(v.* - m);
        v.* = e;
        sum += e;
    }
    const inv: f32 = @floatCast(1.0 / sum);
    const V = @Vector(lanes, f32);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + lanes <= x.len) : (i += lanes) {
            const v: V = x[i..][0..lanes].*;
            x[i..][0..lanes].* = v * @as(V, @splat(inv));
        }
    }
    while (i < x.len) : (i += 1) x[i] *= inv;
    return true;
}

/// What `argmax` found.
pub const Argmax = struct {
    pub const Status = enum(u32) {
        /// `index` is the first position of the maximum.
        ok = 0,
        /// Every value is -inf (masked): no maximum; `index` is x.len.
        none = 1,
        /// x holds a NaN or +inf; `index` is the first of them.
        nonfinite = 2,
    };
    status: Status,
    index: usize,
};

/// The greedy pick over logits: the first index of the largest value (ties
/// go to the lowest index; -0 and +0 are equal), -inf values being masked
/// ones. Two passes, each `L` values at a time: the maximum (and whether any
/// value is a NaN or +inf), then the first position holding it.
pub fn argmax(x: []const f32) Argmax {
    assert(x.len > 0);
    const L = if (lanes > 1) lanes else 4;
    const V = @Vector(L, f32);
    const U = @Vector(L, u32);
    const inf = std.math.inf(f32);
    // A NaN or +inf is the one value that is not below +inf.
    const one: U = @splat(1);
    const zero: U = @splat(0);
    var vmax: V = @splat(-inf);
    var bad: U = zero;
    var i: usize = 0;
    while (i + L <= x.len) : (i += L) {
        const v: V = x[i..][0..L].*;
        bad |= @select(u32, v < @as(V, @splat(inf)), zero, one);
        // `bad` catches NaN, so the maximum need not (`vmaxps` on x86).
        vmax = maxNoNan(L, vmax, v);
    }
    var m: f32 = maxLaneNoNan(L, vmax);
    var any_bad = @reduce(.Or, bad) != 0;
    while (i < x.len) : (i += 1) {
        if (!(x[i] < inf)) any_bad = true;
        m = @max(m, x[i]);
    }
    if (any_bad) {
        for (x, 0..) |v, j| {
            if (!(v < inf)) return .{ .status = .nonfinite, .index = j };
        }
        unreachable;
    }
    if (m == -inf) return .{ .status = .none, .index = x.len };
    i = 0;
    const mv: V = @splat(m);
    while (i + L <= x.len) : (i += L) {
        const v: V = x[i..][0..L].*;
        if (@reduce(.Or, v == mv)) break;
    }
    while (i < x.len) : (i += 1) {
        if (x[i] == m) return .{ .status = .ok, .index = i };
    }
    unreachable;
}

test "argmax: the first maximum, masked -inf, NaN and +inf found, as a plain loop" {
    var prng = std.Random.DefaultPrng.init(0x5eed);
    const r = prng.random();
    var buf: [300]f32 = undefined;
    const inf = std.math.inf(f32);
    for (0..2000) |trial| {
        const n = 1 + r.uintLessThan(usize, buf.len);
        const x = buf[0..n];
        // Few distinct values, so that ties are common.
        for (x) |*v| v.* = @as(f32, @floatFromInt(r.uintLessThan(u32, 7))) - 3;
        if (trial % 3 == 0) x[r.uintLessThan(usize, n)] = -0.0;
        if (trial % 5 == 0) for (x) |*v| {
            if (r.boolean()) v.* = -inf;
        };
        if (trial % 11 == 0) @memset(x, -inf);
        if (trial % 7 == 0) x[r.uintLessThan(usize, n)] = if (r.boolean()) std.math.nan(f32) else inf;
        // The reference: the sampler's loop (strict >, NaN never larger).
        var best: ?usize = null;
        var first_bad: ?usize = null;
        var m = -inf;
        for (x, 0..) |v, j| {
            if (first_bad == null and (std.math.isNan(v) or v == inf)) first_bad = j;
            if (v > m) {
                m = v;
                best = j;
            }
        }
        const got = argmax(x);
        if (first_bad) |j| {
            try testing.expectEqual(Argmax.Status.nonfinite, got.status);
            try testing.expectEqual(j, got.index);
        } else if (best) |j| {
            try testing.expectEqual(Argmax.Status.ok, got.status);
            try testing.expectEqual(j, got.index);
        } else {
            try testing.expectEqual(Argmax.Status.none, got.status);
            try testing.expectEqual(n, got.index);
        }
    }
}

/// In-place RoPE over n_heads heads of head_dim values; the first n_rot
/// dimensions of each head rotate, the rest are left alone.
pub fn rope(x: []f32, n_heads: usize, head_dim: usize, n_rot: usize, pos: u32, inv_freq: []const f32, mode: abi.RopeMode) void {
    assert(n_rot > 0 and n_rot % 2 == 0 and n_rot <= head_dim);
    assert(x.len >= n_heads * head_dim);
    assert(inv_freq.len >= n_rot / 2);
    assert(pos <= abi.rope_max_pos);
    for (0..n_rot / 2) |i| {
        const c, const s = ropeAngle(pos, inv_freq[i]);
        ropePair(x, n_heads, head_dim, n_rot, i, c, s, mode);
    }
}

/// cos and sin of position `pos` times one inverse frequency, as f32: the
/// angle's f32 product taken in f64.
inline fn ropeAngle(pos: u32, inv_freq: f32) struct { f32, f32 } {
    const angle: f32 = @as(f32, @floatFromInt(pos)) * inv_freq;
    return .{ @floatCast(@cos(@as(f64, angle))), @floatCast(@sin(@as(f64, angle))) };
}

/// Rotates pair i of every head by (c, s).
inline fn ropePair(x: []f32, n_heads: usize, head_dim: usize, n_rot: usize, i: usize, c: f32, s: f32, mode: abi.RopeMode) void {
    const half = n_rot / 2;
    const a, const b = switch (mode) {
        .normal => .{ 2 * i, 2 * i + 1 },
        .neox => .{ i, i + half },
    };
    for (0..n_heads) |h| {
        const base = h * head_dim;
        const x0 = x[base + a];
        const x1 = x[base + b];
        x[base + a] = x0 * c - x1 * s;
        x[base + b] = x0 * s + x1 * c;
    }
}

/// cs[2i], cs[2i + 1] = the cos and sin `rope` rotates pair i by at `pos`,
/// for the inv_freq.len pairs: a batch computes them once per row for
/// every layer (`ropeTable`) instead of once per layer.
pub fn ropeAngles(pos: u32, inv_freq: []const f32, cs: []f32) void {
    assert(pos <= abi.rope_max_pos and cs.len == 2 * inv_freq.len);
    for (inv_freq, 0..) |f, i| {
        const c, const s = ropeAngle(pos, f);
        cs[2 * i] = c;
        cs[2 * i + 1] = s;
    }
}

/// `rope` with the cos and sin of its position from `ropeAngles` (cs holds
/// n_rot / 2 pairs): the same rotation, bit for bit.
pub fn ropeTable(x: []f32, n_heads: usize, head_dim: usize, n_rot: usize, cs: []const f32, mode: abi.RopeMode) void {
    assert(n_rot > 0 and n_rot % 2 == 0 and n_rot <= head_dim);
    assert(x.len >= n_heads * head_dim and cs.len == n_rot);
    for (0..n_rot / 2) |i| ropePair(x, n_heads, head_dim, n_rot, i, cs[2 * i], cs[2 * i + 1], mode);
}

pub const Gate = enum { silu, gelu };

/// out = act(gate) * up, act = SiLU or GELU (tanh approximation).
pub fn gatedMul(comptime gate_kind: Gate, gate: []const f32, up: []const f32, out: []f32) void {
    assert(gate.len == up.len and out.len == gate.len);
    const V = @Vector(lanes, f32);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + lanes <= gate.len) : (i += lanes) {
            const g: V = gate[i..][0..lanes].*;
            const u: V = up[i..][0..lanes].*;
            out[i..][0..lanes].* = activate(V, gate_kind, g) * u;
        }
    }
    while (i < gate.len) : (i += 1) out[i] = activate(f32, gate_kind, gate[i]) * up[i];
}

inline fn splatOf(comptime T: type, v: f32) T {
    return if (T == f32) v else @splat(v);
}

inline fn activate(comptime T: type, comptime gate_kind: Gate, g: T) T {
    const one = splatOf(T, 1.0);
    switch (gate_kind) {
        // silu(g) = g * sigmoid(g). libm's expf per lane: a vectorized
        // polynomial exp was ~2% faster on SmolLM2 decode but moved the
        // teacher-forced agreement with llama.cpp from 96.3% to 94.1% (noise
        // of one ulp, amplified by Q8_0 activation rounding; see
        // tests/llamacpp_agreement_test.ts), so it is not used here.
        .silu => return g / (one + exp(-g)),
        // gelu_tanh(g) = 0.5 g (1 + tanh(z)) = g * sigmoid(2 z),
        // z = sqrt(2 / pi) * (g + 0.044715 g^3)
        .gelu => {
            const z = splatOf(T, 0.7978845608028654) * (g + splatOf(T, 0.044715) * g * g * g);
            return g / (one + exp(splatOf(T, -2.0) * z));
        },
    }
}

// ---------------------------------------------------------------------------
// Streaming read, the bandwidth yardstick for the benchmarks.
// ---------------------------------------------------------------------------

/// Reads every byte of `bytes` once (32 bytes at a time where the variant
/// allows) and returns an XOR fold so the loads cannot be elided.
pub fn streamRead(bytes: []const u8) u64 {
    // 32-byte loads, four per 128 bytes, on every variant: a 64-byte load
    // loop streamed slower on Zen 4 (bench:read-ceiling, 2 MiB pages: 34.3
    // against 37.1 GB/s at 1 thread). The fold is the XOR of every 8-byte
    // word (then the tail's bytes) whatever the load width.
    const W = @Vector(4, u64);
    var acc0: W = @splat(0);
    var acc1: W = @splat(0);
    var i: usize = 0;
    const step = 128;
    while (i + step <= bytes.len) : (i += step) {
        acc0 ^= @as(W, @bitCast(bytes[i..][0..32].*)) ^ @as(W, @bitCast(bytes[i + 32 ..][0..32].*));
        acc1 ^= @as(W, @bitCast(bytes[i + 64 ..][0..32].*)) ^ @as(W, @bitCast(bytes[i + 96 ..][0..32].*));
    }
    var r: u64 = @reduce(.Xor, acc0 ^ acc1);
    while (i < bytes.len) : (i += 1) r ^= bytes[i];
    return r;
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;
const expectClose = kernels.expectClose;

test "float kernels against plain loops" {
    var prng = std.Random.DefaultPrng.init(7);
    const rng = prng.random();
    var x: [77]f32 = undefined;
    var w: [77]f32 = undefined;
    var out: [77]f32 = undefined;
    for (&x, &w) |*a, *b| {
        a.* = rng.floatNorm(f32) * 3;
        b.* = rng.floatNorm(f32);
    }
    for ([_]usize{ 2, 5, 16, 17, 33, 77 }) |n| {
        rmsNorm(x[0..n], w[0..n], 1e-6, out[0..n]);
        var ss: f64 = 0;
        for (x[0..n]) |v| ss += @as(f64, v) * v;
        const scale: f32 = @floatCast(1.0 / @sqrt(ss / @as(f64, @floatFromInt(n)) + 1e-6));
        for (0..n) |i| try expectClose(x[i] * scale * w[i], out[i], 1e-5);

        gatedMul(.silu, x[0..n], w[0..n], out[0..n]);
        for (0..n) |i| {
            const g: f64 = x[i];
            try expectClose(@floatCast(g / (1 + @exp(-g)) * w[i]), out[i], 1e-5);
            // Bit for bit the one-lane-at-a-time formula, vector lanes
            // (expfVec on the x86 SIMD variants) and tail alike.
            try testing.expectEqual(x[i] / (1 + exp(-x[i])) * w[i], out[i]);
        }
        gatedMul(.gelu, x[0..n], w[0..n], out[0..n]);
        for (0..n) |i| {
            const g: f64 = x[i];
            const ref = 0.5 * g * (1 + std.math.tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
            try expectClose(@floatCast(ref * w[i]), out[i], 1e-5);
        }
        var s: [77]f32 = x;
        s[0] = -std.math.inf(f32); // a masked entry
        try testing.expect(softmax(s[0..n]));
        try testing.expectEqual(@as(f32, 0), s[0]);
        var total: f64 = 0;
        for (s[0..n]) |v| total += v;
        try testing.expectApproxEqAbs(@as(f64, 1), total, 1e-5);
    }
}

test "rope: position 0 is the identity, norms are kept, partial rotation" {
    var x: [2 * 8]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) - 7.5;
    const inv = [_]f32{ 1.0, 0.1 };
    var y = x;
    rope(&y, 2, 8, 4, 0, &inv, .neox);
    try testing.expectEqualSlices(f32, &x, &y);
    rope(&y, 2, 8, 4, 5, &inv, .normal);
    for (0..2) |h| {
        const b = h * 8;
        // untouched tail
        try testing.expectEqualSlices(f32, x[b + 4 .. b + 8], y[b + 4 .. b + 8]);
        const n0 = x[b] * x[b] + x[b + 1] * x[b + 1];
        const m0 = y[b] * y[b] + y[b + 1] * y[b + 1];
        try expectClose(n0, m0, 1e-5);
    }
}

test "rope from a table of angles equals rope bit for bit" {
    var prng = std.Random.DefaultPrng.init(7);
    const rng = prng.random();
    var inv: [32]f32 = undefined;
    for (&inv, 0..) |*f, i| f.* = std.math.pow(f32, 10000, -@as(f32, @floatFromInt(i)) / 32);
    var x: [3 * 64]f32 = undefined;
    var cs: [64]f32 = undefined;
    for ([_]u32{ 0, 1, 17, 511, 4095, 100_000, abi.rope_max_pos }) |pos| {
        for ([_]usize{ 64, 40 }) |n_rot| {
            inline for (.{ abi.RopeMode.normal, abi.RopeMode.neox }) |mode| {
                for (&x) |*v| v.* = rng.float(f32) * 4 - 2;
                var want = x;
                rope(&want, 3, 64, n_rot, pos, inv[0 .. n_rot / 2], mode);
                ropeAngles(pos, inv[0 .. n_rot / 2], cs[0..n_rot]);
                ropeTable(&x, 3, 64, n_rot, cs[0..n_rot], mode);
                try testing.expectEqualSlices(u32, @as(*const [192]u32, @ptrCast(&want)), @as(*const [192]u32, @ptrCast(&x)));
            }
        }
    }
}

test "streamRead folds every byte" {
    var buf: [300]u8 = undefined;
    for (&buf, 0..) |*b, i| b.* = @truncate(i *% 31);
    var expect: u64 = 0;
    // reference: XOR of the 64-bit words of whole 128-byte steps, then tail bytes
    const whole = buf.len / 128 * 128;
    var i: usize = 0;
    while (i < whole) : (i += 8) expect ^= std.mem.readInt(u64, buf[i..][0..8], .little);
    while (i < buf.len) : (i += 1) expect ^= buf[i];
    try testing.expectEqual(expect, streamRead(&buf));
}
