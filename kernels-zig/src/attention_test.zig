//! Tests of attention.zig: every path against a plain softmax, the
//! two-pass head kernel, the f64 dot of dequantized values, and, bit for
//! bit, against `attentionGroupOneByOne` (the kernel as it was before its
//! loops were reordered) and each other (rows together, a group too large
//! to round q once, Q8_0 against its dequantized values).

const std = @import("std");
const abi = @import("abi.zig");
const kernels = @import("kernels.zig");
const attention = @import("attention.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const BlockQ8_0 = abi.BlockQ8_0;
const lanes = kernels.lanes;
const exp = kernels.exp;
const attentionGroup = attention.attentionGroup;
const attentionHead = attention.attentionHead;
const attentionRows = attention.attentionRows;
const stackedRows = attention.stackedRows;
const attention_max_group = attention.attention_max_group;
const attention_block = attention.attention_block;
const q_round_max = attention.q_round_max;
const expNonPositive = attention.expNonPositive;
const kvLoad = attention.kvLoad;
const kvOne = attention.kvOne;
const oneScore = attention.oneScore;
const qLoad = attention.qLoad;
const qOne = attention.qOne;
const treeSum = attention.treeSum;

const testing = std.testing;
const expectClose = kernels.expectClose;
const expectCloseMag = kernels.expectCloseMag;
const quantizeQ8_0 = kernels.quantizeQ8_0;

test "attention over an f16 cache matches a plain softmax" {
    const hd = 8;
    var q: [hd]f32 = .{ 0.5, -1, 0.25, 2, 0, 1, -0.5, 0.75 };
    var kc: [4 * hd]f16 = undefined;
    var vc: [4 * hd]f16 = undefined;
    for (&kc, &vc, 0..) |*a, *b, i| {
        a.* = @floatCast(@as(f32, @floatFromInt(@as(i32, @intCast(i % 7)) - 3)) * 0.25);
        b.* = @floatCast(@as(f32, @floatFromInt(i)) * 0.125);
    }
    var scores: [4]f32 = undefined;
    var out: [hd]f32 = undefined;
    attentionHead(f16, &q, &kc, &vc, hd, 0, 1, 4, 0.35, 0, &scores, &out);
    var w: [4]f64 = undefined;
    var total: f64 = 0;
    for (1..4) |j| {
        var d: f64 = 0;
        for (0..hd) |i| d += q[i] * @as(f64, @floatCast(kc[j * hd + i]));
        w[j] = @exp(d * 0.35);
        total += w[j];
    }
    for (0..hd) |i| {
        var want: f64 = 0;
        for (1..4) |j| want += w[j] / total * @as(f64, @floatCast(vc[j * hd + i]));
        try expectClose(@floatCast(want), out[i], 1e-5);
    }
}

test "grouped online-softmax attention matches the two-pass head kernel" {
    var prng = std.Random.DefaultPrng.init(21);
    const rng = prng.random();
    inline for (.{ f32, f16 }) |T| {
        for ([_]usize{ 1, 3, 4 }) |group| {
            for ([_]usize{ 1, 31, 32, 33, 100 }) |n_pos| {
                const hd = 40;
                const n_kv = 2;
                const stride = n_kv * hd;
                var kc: [100 * 2 * 40]T = undefined;
                var vc: [100 * 2 * 40]T = undefined;
                for (&kc, &vc) |*a, *b| {
                    a.* = @floatCast(rng.float(f32) * 2 - 1);
                    b.* = @floatCast(rng.float(f32) * 2 - 1);
                }
                var q: [4 * 40]f32 = undefined;
                for (&q) |*x| x.* = (rng.float(f32) * 2 - 1) * 3;
                var out: [4 * 40]f32 = undefined;
                const first: usize = if (n_pos > 40) 7 else 0;
                const softcap: f32 = if (group == 3) 5 else 0;
                attentionGroup(T, q[0 .. group * hd], group, &kc, &vc, stride, hd, first, n_pos, 0.2, softcap, out[0 .. group * hd]);
                for (0..group) |g| {
                    var scores: [100]f32 = undefined;
                    var want: [40]f32 = undefined;
                    attentionHead(T, q[g * hd ..][0..hd], &kc, &vc, stride, hd, first, n_pos, 0.2, softcap, &scores, &want);
                    for (0..hd) |d| try expectCloseMag(want[d], out[g * hd + d], 2e-5, 1);
                }
            }
        }
    }
}

/// attentionGroup as it was before its scores were reduced L at a time, its
/// outputs kept in registers and its K and V slices loaded once per tile of
/// heads: one score, one reduction and one V row at a time. The tests below
/// hold the current kernel to it bit for bit, so that the faster loop order
/// changed no result.
fn attentionGroupOneByOne(
    comptime T: type,
    q: []const f32,
    group: usize,
    k: [*]const T,
    v: [*]const T,
    stride: usize,
    head_offset: usize,
    first: usize,
    n_pos: usize,
    scale: f32,
    softcap: f32,
    out: []f32,
) void {
    assert(group >= 1 and group <= attention_max_group);
    assert(q.len % group == 0 and out.len == q.len and first < n_pos);
    const hd = q.len / group;
    const B = attention_block;
    const L = if (lanes > 1) lanes else 1;
    const V = @Vector(L, f32);
    var m: [attention_max_group]f32 = undefined;
    var l: [attention_max_group]f32 = undefined;
    var s: [attention_max_group][B]f32 align(64) = undefined;
    @memset(m[0..group], -std.math.inf(f32));
    @memset(l[0..group], 0);
    @memset(out, 0);
    var j0 = first;
    while (j0 < n_pos) : (j0 += B) {
        const nb = @min(B, n_pos - j0);
        // Scores of the block for every head of the group.
        for (0..nb) |jj| {
            const krow = (j0 + jj) * stride + head_offset;
            for (0..group) |g| s[g][jj] = oneScore(T, q[g * hd ..][0..hd], k, krow, scale, softcap);
        }
        // Online softmax: rescale what was accumulated to the new maximum.
        for (0..group) |g| {
            var bm: f32 = -std.math.inf(f32);
            for (s[g][0..nb]) |x| bm = @max(bm, x);
            const new_m = @max(m[g], bm);
            const corr: f32 = if (m[g] == -std.math.inf(f32)) 0 else expNonPositive(1, @splat(m[g] - new_m))[0];
            m[g] = new_m;
            var sum: f32 = 0;
            var jj: usize = 0;
            while (jj + 16 <= nb) : (jj += 16) {
                const e = expNonPositive(16, s[g][jj..][0..16].* - @as(@Vector(16, f32), @splat(new_m)));
                s[g][jj..][0..16].* = e;
                sum += treeSum(16, e);
            }
            while (jj < nb) : (jj += 1) {
                const e = expNonPositive(1, @splat(s[g][jj] - new_m))[0];
                s[g][jj] = e;
                sum += e;
            }
            l[g] = l[g] * corr + sum;
            if (corr != 1) {
                for (out[g * hd ..][0..hd]) |*o| o.* *= corr;
            }
        }
        // out += p . V, each V row converted once for the group.
        for (0..nb) |jj| {
            const vrow = (j0 + jj) * stride + head_offset;
            var d: usize = 0;
            if (L > 1) {
                while (d + L <= hd) : (d += L) {
                    const vf = kvLoad(T, L, v, vrow + d);
                    for (0..group) |g| {
                        const o = out[g * hd + d ..][0..L];
                        o.* = @mulAdd(V, @splat(s[g][jj]), vf, o.*);
                    }
                }
            }
            while (d < hd) : (d += 1) {
                const vf = kvOne(T, v, vrow + d);
                for (0..group) |g| out[g * hd + d] += s[g][jj] * vf;
            }
        }
    }
    for (0..group) |g| {
        const inv = 1.0 / l[g];
        for (out[g * hd ..][0..hd]) |*o| o.* *= inv;
    }
}

test "attention over an f16 cache rounds q to f16, as llama.cpp" {
    // llama.cpp's KQ product converts q to the cache's f16; an exact f64
    // two-pass softmax of f16(q) is the reference. Without the rounding the
    // kernel is ~1e-4 off.
    var prng = std.Random.DefaultPrng.init(41);
    const rng = prng.random();
    const hd = 64;
    const n_pos = 20;
    const group = 2;
    var kc: [n_pos * hd]f16 = undefined;
    var vc: [n_pos * hd]f16 = undefined;
    for (&kc, &vc) |*a, *b| {
        a.* = @floatCast(rng.float(f32) * 2 - 1);
        b.* = @floatCast(rng.float(f32) * 2 - 1);
    }
    var q: [group * hd]f32 = undefined;
    for (&q) |*x| x.* = (rng.float(f32) * 2 - 1) * 3;
    var out: [group * hd]f32 = undefined;
    const scale: f32 = 0.125;
    attentionGroup(f16, &q, group, &kc, &vc, hd, 0, 0, n_pos, scale, 0, &out);
    var worst: f64 = 0;
    for (0..group) |g| {
        var sc: [n_pos]f64 = undefined;
        var m: f64 = -std.math.inf(f64);
        for (0..n_pos) |j| {
            var dot: f64 = 0;
            for (0..hd) |d| dot += @as(f64, qOne(f16, q[g * hd + d])) * @as(f64, kc[j * hd + d]);
            sc[j] = dot * scale;
            m = @max(m, sc[j]);
        }
        var l: f64 = 0;
        for (&sc) |*x| {
            x.* = @exp(x.* - m);
            l += x.*;
        }
        for (0..hd) |d| {
            var acc: f64 = 0;
            for (0..n_pos) |j| acc += sc[j] * @as(f64, vc[j * hd + d]);
            worst = @max(worst, @abs(acc / l - out[g * hd + d]));
        }
    }
    try std.testing.expect(worst < 1e-5);
}

test "attention: scores L at a time and register outputs change no bit" {
    var prng = std.Random.DefaultPrng.init(33);
    const rng = prng.random();
    inline for (.{ f32, f16 }) |T| {
        for ([_]usize{ 1, 3, 4, 7 }) |group| {
            for ([_]usize{ 40, 64, 128 }) |hd| {
                for ([_]usize{ 1, 15, 16, 17, 33, 70 }) |n_pos| {
                    const n_kv = 2;
                    const stride = n_kv * hd;
                    var kc: [70 * 2 * 128]T = undefined;
                    var vc: [70 * 2 * 128]T = undefined;
                    for (&kc, &vc) |*a, *b| {
                        a.* = @floatCast(rng.float(f32) * 2 - 1);
                        b.* = @floatCast(rng.float(f32) * 2 - 1);
                    }
                    var q: [7 * 128]f32 = undefined;
                    for (&q) |*x| x.* = (rng.float(f32) * 2 - 1) * 3;
                    var got: [7 * 128]f32 = undefined;
                    var want: [7 * 128]f32 = undefined;
                    const first: usize = if (n_pos > 40) 5 else 0;
                    const softcap: f32 = if (group == 3) 5 else 0;
                    const n = group * hd;
                    attentionGroup(T, q[0..n], group, &kc, &vc, stride, hd, first, n_pos, 0.125, softcap, got[0..n]);
                    attentionGroupOneByOne(T, q[0..n], group, &kc, &vc, stride, hd, first, n_pos, 0.125, softcap, want[0..n]);
                    for (got[0..n], want[0..n]) |a, b| try std.testing.expectEqual(@as(u32, @bitCast(b)), @as(u32, @bitCast(a)));
                }
            }
        }
    }
}

test "attention: rows together give each row's attentionGroup, bit for bit" {
    // Rows share the whole blocks all of them attend to; each row's last,
    // partial blocks (and, from row 1 on, its whole ones beyond row 0's)
    // run alone. Positions cross block boundaries at every row count.
    var prng = std.Random.DefaultPrng.init(71);
    const rng = prng.random();
    const max_pos = 100;
    inline for (.{ f32, f16, BlockQ8_0 }) |T| {
        for ([_]usize{ 1, 3, 4 }) |group| {
            for ([_]usize{ 40, 64 }) |hd| {
                if (T == BlockQ8_0 and hd % qk != 0) continue;
                const n_kv = 2;
                const stride = n_kv * hd;
                const values = max_pos * stride;
                var kf: [max_pos * 2 * 64]f32 = undefined;
                var vf: [max_pos * 2 * 64]f32 = undefined;
                for (kf[0..values], vf[0..values]) |*a, *b| {
                    a.* = rng.float(f32) * 2 - 1;
                    b.* = rng.float(f32) * 2 - 1;
                }
                var kc: [max_pos * 2 * 64]T = undefined;
                var vc: [max_pos * 2 * 64]T = undefined;
                if (T == BlockQ8_0) {
                    try testing.expect(quantizeQ8_0(kf[0..values], kc[0 .. values / qk]));
                    try testing.expect(quantizeQ8_0(vf[0..values], vc[0 .. values / qk]));
                } else {
                    for (kc[0..values], vc[0..values], kf[0..values], vf[0..values]) |*a, *b, x, y| {
                        a.* = @floatCast(x);
                        b.* = @floatCast(y);
                    }
                }
                const heads = n_kv * group;
                // Rows of a plan's q buffer: every head of the layer, then padding.
                const q_stride = heads * hd + 8;
                var q: [5 * (2 * 4 * 64 + 8)]f32 = undefined;
                for (&q) |*x| x.* = (rng.float(f32) * 2 - 1) * 3;
                for ([_]usize{ 1, 2, 4, 5 }) |rows| {
                    if (rows * group > attention_max_group) continue;
                    for ([_]usize{ 1, 31, 32, 33, 64, 70, 95 }) |n_pos0| {
                        for ([_]usize{ 0, 5 }) |first| {
                            if (first >= n_pos0) continue;
                            const softcap: f32 = if (group == 3) 5 else 0;
                            const kvh: usize = 1;
                            var got: [5 * (2 * 4 * 64 + 8)]f32 = @splat(0);
                            attentionRows(T, q[kvh * group * hd ..].ptr, q_stride, rows, group, hd, kc[0..].ptr, vc[0..].ptr, stride, kvh * hd, first, n_pos0, 0.125, softcap, got[kvh * group * hd ..].ptr, q_stride);
                            for (0..rows) |r| {
                                const at = r * q_stride + kvh * group * hd;
                                var want: [4 * 64]f32 = undefined;
                                attentionGroup(T, q[at..][0 .. group * hd], group, kc[0..].ptr, vc[0..].ptr, stride, kvh * hd, first, n_pos0 + r, 0.125, softcap, want[0 .. group * hd]);
                                for (got[at..][0 .. group * hd], want[0 .. group * hd]) |a, b| try std.testing.expectEqual(@as(u32, @bitCast(b)), @as(u32, @bitCast(a)));
                            }
                        }
                    }
                }
            }
        }
    }
}

test "stackedRows: whole tiles within the kernel's buffers" {
    try testing.expectEqual(@as(usize, 4), stackedRows(3, 64, 2));
    try testing.expectEqual(@as(usize, 4), stackedRows(3, 64, 4));
    try testing.expectEqual(@as(usize, 4), stackedRows(4, 64, 4));
    try testing.expectEqual(@as(usize, 4), stackedRows(4, 256, 4));
    try testing.expectEqual(@as(usize, 2), stackedRows(6, 128, 2));
    try testing.expectEqual(@as(usize, 16), stackedRows(1, 64, 4));
    try testing.expectEqual(@as(usize, 2), stackedRows(8, 64, 4));
    // No whole tile at any count: as many rows as fit.
    try testing.expectEqual(@as(usize, 5), stackedRows(3, 64, 16));
    // Too large to take two rows at once.
    try testing.expectEqual(@as(usize, 1), stackedRows(16, 64, 4));
    try testing.expectEqual(@as(usize, 1), stackedRows(9, 512, 4));
    for (1..attention_max_group + 1) |g| {
        for ([_]usize{ 32, 64, 128, 256 }) |hd| {
            const r = stackedRows(g, hd, 2);
            try testing.expect(r >= 1 and (r == 1 or (r * g <= attention_max_group and r * g * hd <= q_round_max)));
        }
    }
}

test "attention: a group too large to round q once takes the same values" {
    // group x head_dim above q_round_max: an f16 cache's kernel rounds q as
    // it goes (`qLoad` per slice) instead of once; every bit stays the same.
    const alloc = testing.allocator;
    var prng = std.Random.DefaultPrng.init(57);
    const rng = prng.random();
    for ([_]usize{ 9, 16 }) |group| {
        const hd = 512;
        const n_pos = 37;
        const n = group * hd;
        try testing.expect(n > q_round_max);
        const kc = try alloc.alloc(f16, n_pos * hd);
        defer alloc.free(kc);
        const vc = try alloc.alloc(f16, n_pos * hd);
        defer alloc.free(vc);
        for (kc, vc) |*a, *b| {
            a.* = @floatCast(rng.float(f32) * 2 - 1);
            b.* = @floatCast(rng.float(f32) * 2 - 1);
        }
        const q = try alloc.alloc(f32, 3 * n);
        defer alloc.free(q);
        for (q[0..n]) |*x| x.* = (rng.float(f32) * 2 - 1) * 3;
        const got = q[n .. 2 * n];
        const want = q[2 * n .. 3 * n];
        attentionGroup(f16, q[0..n], group, kc.ptr, vc.ptr, hd, 0, 3, n_pos, 0.05, 0, got);
        attentionGroupOneByOne(f16, q[0..n], group, kc.ptr, vc.ptr, hd, 0, 3, n_pos, 0.05, 0, want);
        for (got, want) |a, b| try std.testing.expectEqual(@as(u32, @bitCast(b)), @as(u32, @bitCast(a)));
    }
}

test "the softmax exp is within 2 ulp of expf" {
    var x: f32 = -87;
    while (x <= 0) : (x += 0.0137) {
        const got = expNonPositive(1, @splat(x))[0];
        const want = @exp(x);
        if (@abs(got - want) > 2 * (std.math.nextAfter(f32, want, 1) - want) + 1e-37) {
            std.debug.print("x {d} got {e} want {e}\n", .{ x, got, want });
            return error.TestUnexpectedResult;
        }
    }
}

test "attention over a Q8_0 cache equals attention over its dequantized values" {
    var prng = std.Random.DefaultPrng.init(47);
    const rng = prng.random();
    for ([_]usize{ 1, 3, 7 }) |group| {
        for ([_]usize{ 32, 64, 128 }) |hd| {
            for ([_]usize{ 1, 15, 16, 33, 70 }) |n_pos| {
                const n_kv = 2;
                const stride = n_kv * hd;
                var kf: [70 * 2 * 128]f32 = undefined;
                var vf: [70 * 2 * 128]f32 = undefined;
                var kq: [70 * 2 * 128 / qk]BlockQ8_0 = undefined;
                var vq: [70 * 2 * 128 / qk]BlockQ8_0 = undefined;
                const values = n_pos * stride;
                for (kf[0..values], vf[0..values]) |*a, *b| {
                    a.* = rng.float(f32) * 2 - 1;
                    b.* = rng.float(f32) * 2 - 1;
                }
                try testing.expect(quantizeQ8_0(kf[0..values], kq[0 .. values / qk]));
                try testing.expect(quantizeQ8_0(vf[0..values], vq[0 .. values / qk]));
                // The f32 cache holds exactly the values the Q8_0 one decodes to.
                for (0..values) |e| {
                    kf[e] = kvOne(BlockQ8_0, &kq, e);
                    vf[e] = kvOne(BlockQ8_0, &vq, e);
                }
                var q: [7 * 128]f32 = undefined;
                for (&q) |*x| x.* = (rng.float(f32) * 2 - 1) * 3;
                var got: [7 * 128]f32 = undefined;
                var want: [7 * 128]f32 = undefined;
                var slow: [7 * 128]f32 = undefined;
                const first: usize = if (n_pos > 40) 5 else 0;
                const n = group * hd;
                attentionGroup(BlockQ8_0, q[0..n], group, &kq, &vq, stride, hd, first, n_pos, 0.125, 0, got[0..n]);
                attentionGroup(f32, q[0..n], group, &kf, &vf, stride, hd, first, n_pos, 0.125, 0, want[0..n]);
                attentionGroupOneByOne(BlockQ8_0, q[0..n], group, &kq, &vq, stride, hd, first, n_pos, 0.125, 0, slow[0..n]);
                for (got[0..n], want[0..n], slow[0..n]) |a, b, c| {
                    try std.testing.expectEqual(@as(u32, @bitCast(b)), @as(u32, @bitCast(a)));
                    try std.testing.expectEqual(@as(u32, @bitCast(c)), @as(u32, @bitCast(a)));
                }
            }
        }
    }
}
