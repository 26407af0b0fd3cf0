//! Stripe kernels for the tile types that keep ggml's blocks whole (Q4_1,
//! Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) and for F16/BF16 tiles: y = W x for one
//! 128-row output stripe, for a batch of tokens, reading the tiles in place.
//!
//! One kernel per layout, parameterized at comptime by the block type (its
//! decoder, blocks.zig) and by the variant's integer dot primitive:
//! `vpdpbusd` (AVX-VNNI, AVX-512 VNNI, on ymm), `vpmaddubsw` + `vpmaddwd`
//! (AVX2), `sdot` or widening products (NEON), a plain loop (scalar, wasm).
//! Activations are the plan's ActRows (Q8_0 blocks of 32 with their f32
//! scales and integer sums, packing.zig). For sub-block j of a weight block
//! and the activation block g it meets:
//!
//!   unsigned types: sum_i (s q_i + m) (dx a_i) = s dx sum(q a) + m dx sum(a)
//!   signed types:   sum_i (s_half q_i) (dx a_i) = dx (s_lo sum_lo + s_hi sum_hi)
//!
//! Each sub-block's 32 weights are decoded once and used by up to four
//! tokens. Every variant computes the same integers and the same float
//! operations in the same order (8-lane f32 vectors, no fused multiply-add, a
//! fixed reduction tree), so results are bit-identical across variants,
//! thread counts and batch sizes.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");
const blocks = @import("blocks.zig");
const packing = @import("packing.zig");
const k = @import("kernels.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const variant = k.variant;
const Block = blocks.Block;

const V8i32 = @Vector(8, i32);
const V8f32 = @Vector(8, f32);
const V32u8 = @Vector(32, u8);
const V32i8 = @Vector(32, i8);

/// Tokens whose accumulators are kept while one row's weights are decoded.
const token_group: usize = 4;

/// Lane l: sum of q[i] * x[i] for i in 4l..4l+3; q unsigned and below 64.
inline fn dotU(q: V32u8, x: V32i8) V8i32 {
    switch (variant) {
        .avx512vnni, .avxvnni => return k.@"llvm.x86.avx512.vpdpbusd.256"(@splat(0), @bitCast(q), @bitCast(x)),
        // Pairs stay within i16: 2 * 63 * 127 < 2^15.
        .avx2 => return k.@"llvm.x86.avx2.pmadd.wd"(k.@"llvm.x86.avx2.pmadd.ub.sw"(q, x), @splat(1)),
        .neon, .neon_dotprod => return k.dot4(8, @bitCast(q), x),
        .scalar => {
            var out: V8i32 = undefined;
            for (0..8) |l| {
                var s: i32 = 0;
                for (0..4) |i| s += @as(i32, q[4 * l + i]) * @as(i32, x[4 * l + i]);
                out[l] = s;
            }
            return out;
        },
    }
}

/// The same for signed weights in [-32, 31]: on x86 |w| against x with w's
/// sign (`vpsignb`), exact.
inline fn dotS(w: V32i8, x: V32i8) V8i32 {
    switch (variant) {
        .avx512vnni, .avxvnni, .avx2 => {
            const a: V32u8 = @bitCast(@select(i8, w < @as(V32i8, @splat(0)), -%w, w));
            return dotU(a, k.@"llvm.x86.avx2.psign.b"(x, w));
        },
        .neon, .neon_dotprod => return k.dot4(8, w, x),
        .scalar => {
            var out: V8i32 = undefined;
            for (0..8) |l| {
                var s: i32 = 0;
                for (0..4) |i| s += @as(i32, w[4 * l + i]) * @as(i32, x[4 * l + i]);
                out[l] = s;
            }
            return out;
        },
    }
}

/// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)): one order everywhere.
inline fn hsum(v: V8f32) f32 {
    const a: @Vector(4, f32) = std.simd.extract(v, 0, 4);
    const b: @Vector(4, f32) = std.simd.extract(v, 4, 4);
    const c = a + b;
    const lo: @Vector(2, f32) = std.simd.extract(c, 0, 2);
    const hi: @Vector(2, f32) = std.simd.extract(c, 2, 2);
    const d = lo + hi;
    return d[0] + d[1];
}

inline fn readF32(p: [*]const u8) f32 {
    return @bitCast(std.mem.readInt(u32, p[0..4], .little));
}

/// One stripe of a whole-block type: `tr` rows by `cols` columns in column
/// tiles of 256, for tokens [0, n_tok).
fn quantStripe(comptime b: Block, base: [*]const u8, tr: usize, cols: usize, act: [*]const u8, act_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize) void {
    @setEvalBranchQuota(20000);
    const E = comptime Block.elements(b);
    const BB = comptime Block.bytes(b);
    const subs = comptime E / 32;
    const H = blocks.Header(b);
    assert(tr >= 1 and tr <= packing.tile_rows);
    assert(cols % E == 0 and cols % qk == 0);
    const ng = cols / qk;
    const so = packing.ActRow.scalesOffset(ng);
    const su = packing.ActRow.sumsOffset(ng);
    if (comptime subs == 8) {
        // K-quants: each row's sums are kept as vectors across the stripe's
        // tiles (read in file order) and reduced once per row at the end.
        var t0: usize = 0;
        while (t0 < n_tok) : (t0 += token_group) {
            const nt = @min(token_group, n_tok - t0);
            var rows_acc: [token_group][packing.tile_rows]V8f32 = undefined;
            var rows_off: [token_group][packing.tile_rows]V8f32 = undefined;
            for (0..nt) |i| {
                @memset(rows_acc[i][0..tr], @splat(0));
                @memset(rows_off[i][0..tr], @splat(0));
            }
            var at: usize = 0;
            var k0: usize = 0;
            while (k0 < cols) : (k0 += packing.tile_cols) {
                const nb = @min(packing.tile_cols, cols - k0) / E;
                kRows(b, base + at + packing.tile_header_bytes, tr, nb, k0, act + t0 * act_stride, act_stride, nt, so, su, &rows_acc, &rows_off);
                at += packing.tile_header_bytes + tr * nb * BB;
            }
            for (0..nt) |i| {
                for (0..tr) |r| {
                    const o: f32 = if (comptime b == .q6_k) 0 else hsum(rows_off[i][r]);
                    y[(t0 + i) * y_stride + r] = hsum(rows_acc[i][r]) + o;
                }
            }
        }
        return;
    }
    for (0..n_tok) |t| @memset(y[t * y_stride ..][0..tr], 0);
    var pos: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += packing.tile_cols) {
        const tc = @min(packing.tile_cols, cols - c0);
        const nb = tc / E;
        const body = base + pos + packing.tile_header_bytes;
        var t0: usize = 0;
        while (t0 < n_tok) : (t0 += token_group) {
            const nt = @min(token_group, n_tok - t0);
            for (0..tr) |r| {
                var acc: [token_group]V8f32 = @splat(@splat(0));
                var off: [token_group]f32 = @splat(0);
                for (0..nb) |kb| {
                    const blk = body + (r * nb + kb) * BB;
                    const h = H.of(blk);
                    inline for (0..subs) |j| {
                        const g = (c0 + kb * E) / qk + j;
                        const q = blocks.quants(b, blk, j);
                        const sv: V8f32 = .{
                            h.scale[2 * j],     h.scale[2 * j],     h.scale[2 * j],     h.scale[2 * j],
                            h.scale[2 * j + 1], h.scale[2 * j + 1], h.scale[2 * j + 1], h.scale[2 * j + 1],
                        };
                        for (0..nt) |i| {
                            const row = act + (t0 + i) * act_stride;
                            const xq: V32i8 = @bitCast((row + g * abi.q8_0_block_bytes + 2)[0..32].*);
                            const dx = readF32(row + so + g * 4);
                            const isum = if (comptime Block.signed(b)) dotS(q, xq) else dotU(q, xq);
                            const f: V8f32 = @floatFromInt(isum);
                            acc[i] += f * (sv * @as(V8f32, @splat(dx)));
                            if (comptime !Block.signed(b)) {
                                const sx: f32 = @floatFromInt(std.mem.readInt(i32, (row + su + g * 4)[0..4], .little));
                                off[i] += (h.offset[j] * dx) * sx;
                            }
                        }
                    }
                }
                for (0..nt) |i| y[(t0 + i) * y_stride + r] += hsum(acc[i]) + off[i];
            }
        }
        pos += packing.tile_header_bytes + tr * nb * BB;
    }
}

/// The rows of one K-quant tile (one or more 256-weight super-blocks per row)
/// for nt <= token_group tokens: per super-block, its 8 scales and offsets
/// decoded as vectors once, times the 8 activation scales in one multiply;
/// the tile's sums (and offset terms, per sub-block lane) added to the row's.
inline fn kRows(comptime b: Block, body: [*]const u8, tr: usize, nb: usize, c0: usize, act: [*]const u8, act_stride: usize, nt: usize, so: usize, su: usize, rows_acc: *[token_group][packing.tile_rows]V8f32, rows_off: *[token_group][packing.tile_rows]V8f32) void {
    @setEvalBranchQuota(20000);
    const BB = comptime Block.bytes(b);
    const K = blocks.KScales(b);
    for (0..tr) |r| {
        var acc: [token_group]V8f32 = @splat(@splat(0));
        var off: [token_group]V8f32 = @splat(@splat(0));
        for (0..nb) |kb| {
            const blk = body + (r * nb + kb) * BB;
            const h = K.of(blk);
            const g0 = (c0 + kb * 256) / qk;
            var q: [8]if (Block.signed(b)) V32i8 else V32u8 = undefined;
            inline for (0..8) |j| q[j] = blocks.quants(b, blk, j);
            for (0..nt) |i| {
                const row = act + i * act_stride;
                const dxv: V8f32 = @bitCast((row + so + g0 * 4)[0..32].*);
                if (comptime b == .q6_k) {
                    inline for (0..8) |j| {
                        const xq: V32i8 = @bitCast((row + (g0 + j) * abi.q8_0_block_bytes + 2)[0..32].*);
                        const f: V8f32 = @floatFromInt(dotS(q[j], xq));
                        const sv: V8f32 = @shuffle(f32, h.scale, undefined, [8]i32{ 2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1 });
                        acc[i] += f * (sv * @as(V8f32, @splat(dxv[j])));
                    }
                } else {
                    const sdx = h.scale * dxv;
                    inline for (0..8) |j| {
                        const xq: V32i8 = @bitCast((row + (g0 + j) * abi.q8_0_block_bytes + 2)[0..32].*);
                        const f: V8f32 = @floatFromInt(dotU(q[j], xq));
                        acc[i] += f * @as(V8f32, @splat(sdx[j]));
                    }
                    const sx: @Vector(8, i32) = @bitCast((row + su + g0 * 4)[0..32].*);
                    off[i] += (h.offset * dxv) * @as(V8f32, @floatFromInt(sx));
                }
            }
        }
        for (0..nt) |i| {
            rows_acc[i][r] += acc[i];
            rows_off[i][r] += off[i];
        }
    }
}

inline fn floatsAt(comptime t: blocks.TileType, p: [*]const u8) V8f32 {
    if (variant == .scalar) {
        // One value at a time (the wasm build has no f16 vector conversion).
        var v: V8f32 = undefined;
        inline for (0..8) |i| v[i] = floatAt(t, p + 2 * i);
        return v;
    }
    switch (t) {
        .f16 => {
            const h: @Vector(8, f16) = @bitCast(p[0..16].*);
            return @floatCast(h);
        },
        .bf16 => {
            const h: @Vector(8, u16) = @bitCast(p[0..16].*);
            const w: @Vector(8, u32) = h;
            return @bitCast(w << @as(@Vector(8, u5), @splat(16)));
        },
        else => unreachable,
    }
}

inline fn floatAt(comptime t: blocks.TileType, p: [*]const u8) f32 {
    const bits = std.mem.readInt(u16, p[0..2], .little);
    return switch (t) {
        .f16 => abi.f16ToF32(bits),
        .bf16 => @bitCast(@as(u32, bits) << 16),
        else => unreachable,
    };
}

/// One stripe of F16 or BF16 tiles against f32 activations.
fn floatStripe(comptime t: blocks.TileType, base: [*]const u8, tr: usize, cols: usize, act: [*]const u8, act_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize) void {
    assert(tr >= 1 and tr <= packing.tile_rows);
    for (0..n_tok) |i| @memset(y[i * y_stride ..][0..tr], 0);
    var pos: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += packing.tile_cols) {
        const tc = @min(packing.tile_cols, cols - c0);
        const body = base + pos + packing.tile_header_bytes;
        var t0: usize = 0;
        while (t0 < n_tok) : (t0 += token_group) {
            const nt = @min(token_group, n_tok - t0);
            for (0..tr) |r| {
                const w = body + r * tc * 2;
                var acc: [token_group]V8f32 = @splat(@splat(0));
                var tail: [token_group]f32 = @splat(0);
                var c: usize = 0;
                while (c + 8 <= tc) : (c += 8) {
                    const wv = floatsAt(t, w + 2 * c);
                    for (0..nt) |i| {
                        const x: [*]align(1) const f32 = @ptrCast(act + (t0 + i) * act_stride);
                        const xv: V8f32 = x[c0 + c ..][0..8].*;
                        acc[i] += wv * xv;
                    }
                }
                while (c < tc) : (c += 1) {
                    const wv = floatAt(t, w + 2 * c);
                    for (0..nt) |i| {
                        const x: [*]align(1) const f32 = @ptrCast(act + (t0 + i) * act_stride);
                        tail[i] += wv * x[c0 + c];
                    }
                }
                for (0..nt) |i| y[(t0 + i) * y_stride + r] += hsum(acc[i]) + tail[i];
            }
        }
        pos += packing.tile_header_bytes + tr * tc * 2;
    }
}

/// y[t][r] = row r of the stripe at `base` times token t's activations, for
/// every tile type but Q4_0, Q8_0 and F32 (kernels.zig `tileStripe`). `act`
/// holds n_tok rows `act_stride` bytes apart: ActRows for the quantized
/// types, f32 values for F16/BF16.
pub fn blockStripe(t: blocks.TileType, base: [*]const u8, tr: usize, cols: usize, act: [*]const u8, act_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize) void {
    @setEvalBranchQuota(20000);
    assert(n_tok >= 1);
    switch (t) {
        inline .q4_1, .q5_0, .q5_1, .q4_k, .q5_k, .q6_k => |tt| quantStripe(comptime blocks.asBlock(tt).?, base, tr, cols, act, act_stride, n_tok, y, y_stride),
        inline .f16, .bf16 => |tt| floatStripe(tt, base, tr, cols, act, act_stride, n_tok, y, y_stride),
        .q4_0, .q8_0, .f32 => unreachable,
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;

/// Random blocks of type `b` with finite f16 scales over many binades.
fn randomBlocks(comptime b: Block, rng: std.Random, out: []u8) void {
    const BB = comptime Block.bytes(b);
    rng.bytes(out);
    var at: usize = 0;
    while (at < out.len) : (at += BB) {
        const scales: []const usize = switch (b) {
            .q4_1, .q5_1, .q4_k, .q5_k => &.{ 0, 2 },
            .q5_0 => &.{0},
            .q6_k => &.{208},
        };
        for (scales) |s| {
            const bits: u16 = (@as(u16, rng.intRangeAtMost(u5, 8, 16)) << 10) | rng.int(u10) | (@as(u16, rng.int(u1)) << 15);
            std.mem.writeInt(u16, out[at + s ..][0..2], bits, .little);
        }
    }
}

/// ActRows for `n_tok` tokens of `cols` random values (quantized as the plan does).
fn randomActs(rng: std.Random, cols: usize, n_tok: usize, stride: usize, out: []u8, xf: []f32) !void {
    const ng = cols / qk;
    for (0..n_tok) |t| {
        const row = out[t * stride ..];
        const x = xf[t * cols ..][0..cols];
        for (x) |*v| v.* = rng.floatNorm(f32);
        const blocks_out: [*]abi.BlockQ8_0 = @ptrCast(@alignCast(row.ptr));
        try testing.expect(k.quantizeQ8_0(x, blocks_out[0..ng]));
        for (0..ng) |g| {
            const blk = row[g * abi.q8_0_block_bytes ..];
            const d = abi.f16ToF32(@as(u16, blk[0]) | (@as(u16, blk[1]) << 8));
            var sum: i32 = 0;
            for (blk[2..][0..qk]) |q| sum += @as(i8, @bitCast(q));
            std.mem.writeInt(u32, row[packing.ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(d), .little);
            std.mem.writeInt(i32, row[packing.ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
        }
    }
}

/// hsum's order, one value at a time.
fn treeSum(v: [8]f32) f32 {
    const c4 = [4]f32{ v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7] };
    const d2 = [2]f32{ c4[0] + c4[2], c4[1] + c4[3] };
    return d2[0] + d2[1];
}

/// The kernel's arithmetic written out one value at a time (no vectors, no
/// variant): what every variant must give bit for bit.
fn referenceStripe(comptime b: Block, base: [*]const u8, tr: usize, cols: usize, act: [*]const u8, stride: usize, n_tok: usize, y: []f32) void {
    const E = comptime Block.elements(b);
    const BB = comptime Block.bytes(b);
    const ng = cols / qk;
    @memset(y, 0);
    for (0..n_tok) |t| {
        const row = act + t * stride;
        for (0..tr) |r| {
            // K-quants add each tile's lanes (sums, and offset terms per sub-block lane) to the
            // row's and reduce once at the end; the others reduce tile by tile.
            var row_acc = [_]f32{0} ** 8;
            var row_off = [_]f32{0} ** 8;
            var pos: usize = 0;
            var c0: usize = 0;
            while (c0 < cols) : (c0 += packing.tile_cols) {
                const tc = @min(packing.tile_cols, cols - c0);
                const nb = tc / E;
                var acc = [_]f32{0} ** 8;
                var off: f32 = 0;
                var off_lanes = [_]f32{0} ** 8;
                for (0..nb) |kb| {
                    const blk = base + pos + packing.tile_header_bytes + (r * nb + kb) * BB;
                    const h = blocks.Header(b).of(blk);
                    for (0..E / 32) |j| {
                        const g = (c0 + kb * E) / qk + j;
                        const q = blocks.quants(b, blk, j);
                        const dx = readF32(row + packing.ActRow.scalesOffset(ng) + g * 4);
                        for (0..8) |l| {
                            var s: i32 = 0;
                            for (0..4) |i| s += @as(i32, q[4 * l + i]) * @as(i32, @as(i8, @bitCast(row[g * abi.q8_0_block_bytes + 2 + 4 * l + i])));
                            const f: f32 = @floatFromInt(s);
                            acc[l] += f * (h.scale[2 * j + l / 4] * dx);
                        }
                        if (!Block.signed(b)) {
                            const sx: f32 = @floatFromInt(std.mem.readInt(i32, (row + packing.ActRow.sumsOffset(ng) + g * 4)[0..4], .little));
                            if (E == 256) off_lanes[j] += (h.offset[j] * dx) * sx else off += (h.offset[j] * dx) * sx;
                        }
                    }
                }
                if (E == 256) {
                    for (0..8) |l| {
                        row_acc[l] += acc[l];
                        row_off[l] += off_lanes[l];
                    }
                } else {
                    y[t * tr + r] += treeSum(acc) + off;
                }
                pos += packing.tile_header_bytes + tr * nb * BB;
            }
            if (E == 256) {
                const o: f32 = if (Block.signed(b)) 0 else treeSum(row_off);
                y[t * tr + r] = treeSum(row_acc) + o;
            }
        }
    }
}

test "block stripes: this variant equals the value-at-a-time reference bit for bit, 1..9 tokens, and the f64 dot closely" {
    var prng = std.Random.DefaultPrng.init(0xb10c_5791);
    const rng = prng.random();
    const gpa = testing.allocator;
    inline for (.{ Block.q4_1, Block.q5_0, Block.q5_1, Block.q4_k, Block.q5_k, Block.q6_k }) |b| {
        const E = comptime Block.elements(b);
        const BB = comptime Block.bytes(b);
        for ([_]usize{ 1, 5, 128 }) |tr| {
            for ([_]usize{ 1, 2, 3 }) |tiles| {
                // Column counts with a short last tile for the 32-weight types.
                const cols = if (E == 256) tiles * 256 else tiles * 256 - 64;
                const nb_row = cols / E;
                var stripe_len: usize = 0;
                var c0: usize = 0;
                while (c0 < cols) : (c0 += 256) stripe_len += 16 + tr * (@min(256, cols - c0) / E) * BB;
                const stripe = try gpa.alloc(u8, stripe_len);
                defer gpa.free(stripe);
                c0 = 0;
                var at: usize = 0;
                while (c0 < cols) : (c0 += 256) {
                    const body = tr * (@min(256, cols - c0) / E) * BB;
                    randomBlocks(b, rng, stripe[at + 16 ..][0..body]);
                    at += 16 + body;
                }
                const n_tok: usize = 9;
                const ng = cols / qk;
                const stride = packing.ActRow.bytes(ng);
                const act = try gpa.alignedAlloc(u8, 64, stride * n_tok);
                defer gpa.free(act);
                const xf = try gpa.alloc(f32, cols * n_tok);
                defer gpa.free(xf);
                try randomActs(rng, cols, n_tok, stride, act, xf);
                const want = try gpa.alloc(f32, tr * n_tok);
                defer gpa.free(want);
                referenceStripe(b, stripe.ptr, tr, cols, act.ptr, stride, n_tok, want);
                for ([_]usize{ 1, 4, 9 }) |nt| {
                    const got = try gpa.alloc(f32, tr * nt);
                    defer gpa.free(got);
                    blockStripe(@enumFromInt(@intFromEnum(b)), stripe.ptr, tr, cols, act.ptr, stride, nt, got.ptr, tr);
                    for (0..nt * tr) |i| try testing.expectEqual(@as(u32, @bitCast(want[i])), @as(u32, @bitCast(got[i])));
                }
                // Against the dequantized weights and activations in f64.
                var wrow = try gpa.alloc(f32, cols);
                defer gpa.free(wrow);
                for (0..tr) |r| {
                    var pos: usize = 0;
                    c0 = 0;
                    while (c0 < cols) : (c0 += 256) {
                        const tc = @min(256, cols - c0);
                        const nb = tc / E;
                        for (0..nb) |kb| blocks.dequantize(b, stripe.ptr + pos + 16 + (r * nb + kb) * BB, wrow[c0 + kb * E ..][0..E]);
                        pos += 16 + tr * nb * BB;
                    }
                    var dot: f64 = 0;
                    var mag: f64 = 0;
                    for (0..cols) |c| {
                        const g = c / qk;
                        const d = abi.f16ToF32(@as(u16, act[g * 34]) | (@as(u16, act[g * 34 + 1]) << 8));
                        const xv = @as(f64, @floatFromInt(@as(i8, @bitCast(act[g * 34 + 2 + c % qk])))) * d;
                        dot += @as(f64, wrow[c]) * xv;
                        mag += @abs(@as(f64, wrow[c]) * xv);
                    }
                    // The kernel sums scale and offset terms apart, each larger than |w x|
                    // where they cancel: a wrong formula is off by O(mag), rounding is not.
                    try testing.expect(@abs(dot - want[r]) <= 2e-4 * mag + 1e-30);
                }
                _ = nb_row;
            }
        }
    }
}

test "f16 and bf16 stripes against the f64 dot" {
    var prng = std.Random.DefaultPrng.init(0xf16_b16);
    const rng = prng.random();
    const gpa = testing.allocator;
    inline for (.{ blocks.TileType.f16, blocks.TileType.bf16 }) |t| {
        for ([_]usize{ 1, 7, 128 }) |tr| {
            for ([_]usize{ 3, 256, 300, 517 }) |cols| {
                var stripe_len: usize = 0;
                var c0: usize = 0;
                while (c0 < cols) : (c0 += 256) stripe_len += 16 + tr * @min(256, cols - c0) * 2;
                const stripe = try gpa.alloc(u8, stripe_len);
                defer gpa.free(stripe);
                // Values in [-2, 2): f16 and bf16 bits of random floats.
                var pos: usize = 0;
                c0 = 0;
                while (c0 < cols) : (c0 += 256) {
                    const tc = @min(256, cols - c0);
                    for (0..tr * tc) |i| {
                        const v = (rng.float(f32) - 0.5) * 4;
                        const bits: u16 = if (t == .f16) @bitCast(@as(f16, @floatCast(v))) else @truncate(@as(u32, @bitCast(v)) >> 16);
                        std.mem.writeInt(u16, stripe[pos + 16 + 2 * i ..][0..2], bits, .little);
                    }
                    pos += 16 + tr * tc * 2;
                }
                const n_tok = 5;
                const x = try gpa.alloc(f32, cols * n_tok);
                defer gpa.free(x);
                for (x) |*v| v.* = rng.floatNorm(f32);
                const y = try gpa.alloc(f32, tr * n_tok);
                defer gpa.free(y);
                blockStripe(t, stripe.ptr, tr, cols, @ptrCast(x.ptr), cols * 4, n_tok, y.ptr, tr);
                for (0..n_tok) |tok| {
                    for (0..tr) |r| {
                        var dot: f64 = 0;
                        var mag: f64 = 0;
                        pos = 0;
                        c0 = 0;
                        while (c0 < cols) : (c0 += 256) {
                            const tc = @min(256, cols - c0);
                            for (0..tc) |c| {
                                const w = floatAt(t, stripe.ptr + pos + 16 + (r * tc + c) * 2);
                                dot += @as(f64, w) * x[tok * cols + c0 + c];
                                mag += @abs(@as(f64, w) * x[tok * cols + c0 + c]);
                            }
                            pos += 16 + tr * tc * 2;
                        }
                        try testing.expect(@abs(dot - y[tok * tr + r]) <= 1e-5 * mag);
                    }
                }
            }
        }
    }
}
