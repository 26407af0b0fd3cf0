//! ggml's block types that `.cflow` tiles keep whole (docs/FORMAT.md, "Tile
//! payloads"): their byte layouts, and the decoding of one 32-weight
//! sub-block into small unsigned or signed integers plus the scale (and
//! offset) that turn them into values. This file knows bytes only; the
//! kernels (block_kernels.zig, `blockStripe`) and the plan's embedding row use it.
//!
//! Every decoder gives, for sub-block `j` of a block, 32 integers `q` and
//!
//!   value[i] = scale[i / 16] * q[i] + offset          (unsigned types)
//!   value[i] = scale[i / 16] * q[i]                   (signed types)
//!
//! in f32, which is the arithmetic ggml's own dequantization does (checked
//! against it in the tests below and, for whole files, against gguf-py by
//! the TypeScript suite).

const std = @import("std");
const abi = @import("abi.zig");

const assert = std.debug.assert;

/// Tile types (docs/FORMAT.md); ids are the file's `tile_type`.
pub const TileType = enum(u32) {
    q4_0 = 1,
    q8_0 = 2,
    f32 = 3,
    q4_1 = 4,
    q5_0 = 5,
    q5_1 = 6,
    q4_k = 7,
    q5_k = 8,
    q6_k = 9,
    f16 = 10,
    bf16 = 11,
};

pub const max_tile_type: u32 = 11;

/// The whole-block types, whose kernels live here.
pub const Block = enum(u32) {
    q4_1 = 4,
    q5_0 = 5,
    q5_1 = 6,
    q4_k = 7,
    q5_k = 8,
    q6_k = 9,

    /// Weights per block.
    pub fn elements(comptime b: Block) usize {
        return switch (b) {
            .q4_1, .q5_0, .q5_1 => 32,
            .q4_k, .q5_k, .q6_k => 256,
        };
    }

    /// Bytes per block (ggml's `block_*` sizes).
    pub fn bytes(comptime b: Block) usize {
        return switch (b) {
            .q4_1 => 20,
            .q5_0 => 22,
            .q5_1 => 24,
            .q4_k => 144,
            .q5_k => 176,
            .q6_k => 210,
        };
    }

    /// Signed types centre their quants (q - 16, q - 32) and have no offset.
    pub fn signed(comptime b: Block) bool {
        return b == .q5_0 or b == .q6_k;
    }

    /// Two scales per 32 weights (one per 16): Q6_K only.
    pub fn twoScales(comptime b: Block) bool {
        return b == .q6_k;
    }
};

comptime {
    // ggml's block sizes: 2 + 2 + 16; 2 + 4 + 16; 2 + 2 + 4 + 16; 2 + 2 + 12 + 128;
    // 2 + 2 + 12 + 32 + 128; 128 + 64 + 16 + 2.
    assert(Block.bytes(.q4_1) == 4 + 16);
    assert(Block.bytes(.q5_0) == 2 + 4 + 16);
    assert(Block.bytes(.q5_1) == 4 + 4 + 16);
    assert(Block.bytes(.q4_k) == 4 + 12 + 128);
    assert(Block.bytes(.q5_k) == 4 + 12 + 32 + 128);
    assert(Block.bytes(.q6_k) == 128 + 64 + 16 + 2);
}

/// Element size of the float tile types.
pub fn floatBytes(t: TileType) usize {
    return switch (t) {
        .f32 => 4,
        .f16, .bf16 => 2,
        else => 0,
    };
}

pub fn isFloat(t: TileType) bool {
    return floatBytes(t) != 0;
}

pub fn asBlock(t: TileType) ?Block {
    return switch (t) {
        .q4_1 => .q4_1,
        .q5_0 => .q5_0,
        .q5_1 => .q5_1,
        .q4_k => .q4_k,
        .q5_k => .q5_k,
        .q6_k => .q6_k,
        else => null,
    };
}

/// Bytes of `cols` weights of one row of a whole-block type (cols a multiple
/// of the block), or of a float type.
pub fn rowBytes(t: TileType, cols: usize) usize {
    if (isFloat(t)) return cols * floatBytes(t);
    const b = asBlock(t) orelse unreachable;
    return switch (b) {
        inline else => |cb| cols / Block.elements(cb) * Block.bytes(cb),
    };
}

/// Weights per block (1 for the float types, 32 for Q4_0/Q8_0 groups).
pub fn blockElements(t: TileType) usize {
    if (isFloat(t)) return 1;
    const b = asBlock(t) orelse return 32;
    return switch (b) {
        inline else => |cb| Block.elements(cb),
    };
}

inline fn f16At(p: [*]const u8) f32 {
    return abi.f16ToF32(@as(u16, p[0]) | (@as(u16, p[1]) << 8));
}

/// The scales and offsets of a block's sub-blocks: decoded once per block,
/// used by every sub-block (and every token) after.
pub fn Header(comptime b: Block) type {
    const subs = comptime Block.elements(b) / 32;
    return struct {
        /// scale[2j], scale[2j + 1]: the scales of the two halves of sub-block j.
        scale: [2 * subs]f32,
        /// offset[j] (unsigned types): added to every value of sub-block j.
        offset: [subs]f32,

        pub fn of(p: [*]const u8) @This() {
            var h: @This() = undefined;
            switch (b) {
                .q4_1, .q5_1 => {
                    const d = f16At(p);
                    h.scale = .{ d, d };
                    h.offset = .{f16At(p + 2)};
                },
                .q5_0 => {
                    const d = f16At(p);
                    h.scale = .{ d, d };
                    h.offset = .{0};
                },
                .q4_k, .q5_k => {
                    const d = f16At(p);
                    const dmin = f16At(p + 2);
                    const sc = p + 4;
                    for (0..8) |j| {
                        var s: u8 = undefined;
                        var m: u8 = undefined;
                        if (j < 4) {
                            s = sc[j] & 63;
                            m = sc[j + 4] & 63;
                        } else {
                            s = (sc[j + 4] & 0x0f) | ((sc[j - 4] >> 6) << 4);
                            m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
                        }
                        // ggml: d1 = d * sc; m1 = min * m; y = d1 * q - m1.
                        const d1 = d * @as(f32, @floatFromInt(s));
                        h.scale[2 * j] = d1;
                        h.scale[2 * j + 1] = d1;
                        h.offset[j] = -(dmin * @as(f32, @floatFromInt(m)));
                    }
                },
                .q6_k => {
                    const d = f16At(p + 208);
                    const sc = p + 192;
                    // Sub-block j = 4n + k reads scales 8n + 2k and 8n + 2k + 1.
                    for (0..16) |i| h.scale[i] = d * @as(f32, @floatFromInt(@as(i8, @bitCast(sc[i]))));
                    h.offset = @splat(0);
                },
            }
            return h;
        }
    };
}

/// The scales (and offsets) of a K-quant super-block's 8 sub-blocks as
/// vectors, lane j for sub-block j: Q4_K/Q5_K's six-bit scales and mins
/// unpacked four at a time with ggml's masks (`scale = d sc`, `offset =
/// -(dmin m)`, the values `Header.of` gives); Q6_K's 16 int8 scales times d
/// (lanes 2j and 2j + 1 for the halves of sub-block j).
pub fn KScales(comptime b: Block) type {
    comptime assert(Block.elements(b) == 256);
    return struct {
        scale: if (b == .q6_k) @Vector(16, f32) else @Vector(8, f32),
        offset: @Vector(8, f32),

        pub inline fn of(p: [*]const u8) @This() {
            if (b == .q6_k) {
                const sc: @Vector(16, i8) = @bitCast(p[192..][0..16].*);
                const f: @Vector(16, f32) = @floatFromInt(sc);
                return .{ .scale = @as(@Vector(16, f32), @splat(f16At(p + 208))) * f, .offset = @splat(0) };
            }
            const d = f16At(p);
            const dmin = f16At(p + 2);
            const w0 = std.mem.readInt(u32, p[4..8], .little);
            const w1 = std.mem.readInt(u32, p[8..12], .little);
            const w2 = std.mem.readInt(u32, p[12..16], .little);
            const km1: u32 = 0x3f3f3f3f;
            const km2: u32 = 0x0f0f0f0f;
            const km3: u32 = 0x03030303;
            const sc: [2]u32 = .{ w0 & km1, (w2 & km2) | (((w0 >> 6) & km3) << 4) };
            const mn: [2]u32 = .{ w1 & km1, ((w2 >> 4) & km2) | (((w1 >> 6) & km3) << 4) };
            const scb: @Vector(8, u8) = @bitCast(sc);
            const mnb: @Vector(8, u8) = @bitCast(mn);
            const scf: @Vector(8, f32) = @floatFromInt(scb);
            const mnf: @Vector(8, f32) = @floatFromInt(mnb);
            return .{
                .scale = @as(@Vector(8, f32), @splat(d)) * scf,
                .offset = -(@as(@Vector(8, f32), @splat(dmin)) * mnf),
            };
        }
    };
}

/// The 32 quants of sub-block `j` of the block at `p`: unsigned (0..2^bits-1)
/// for unsigned types, centred signed (q - 16, q - 32) for signed ones.
pub inline fn quants(comptime b: Block, p: [*]const u8, j: usize) if (Block.signed(b)) @Vector(32, i8) else @Vector(32, u8) {
    const V16 = @Vector(16, u8);
    const V32 = @Vector(32, u8);
    const lo4: V16 = @splat(0x0f);
    const sh4: @Vector(16, u3) = @splat(4);
    switch (b) {
        .q4_1 => {
            const qs: V16 = p[4..][0..16].*;
            return std.simd.join(qs & lo4, qs >> sh4);
        },
        .q5_0, .q5_1 => {
            const off: usize = if (b == .q5_0) 2 else 4;
            const qh = std.mem.readInt(u32, p[off..][0..4], .little);
            const qs: V16 = p[off + 4 ..][0..16].*;
            const low: V32 = std.simd.join(qs & lo4, qs >> sh4);
            const bits: @Vector(32, u32) = @splat(qh);
            const shifts: @Vector(32, u5) = std.simd.iota(u5, 32);
            const one: @Vector(32, u32) = @splat(1);
            const hb: V32 = @intCast((bits >> shifts) & one);
            const q = low | (hb << @as(@Vector(32, u3), @splat(4)));
            if (b == .q5_0) return @as(@Vector(32, i8), @bitCast(q)) - @as(@Vector(32, i8), @splat(16));
            return q;
        },
        .q4_k, .q5_k => {
            const c = j / 2;
            const qs_at: usize = if (b == .q4_k) 16 else 48;
            const qs: V32 = p[qs_at + 32 * c ..][0..32].*;
            const shift: @Vector(32, u3) = @splat(if (j % 2 == 0) 0 else 4);
            var q = (qs >> shift) & @as(V32, @splat(0x0f));
            if (b == .q5_k) {
                const qh: V32 = p[16..][0..32].*;
                const bit: @Vector(32, u3) = @splat(@intCast(j));
                q |= ((qh >> bit) & @as(V32, @splat(1))) << @as(@Vector(32, u3), @splat(4));
            }
            return q;
        },
        .q6_k => {
            const n = j / 4;
            const k = j % 4;
            const ql: V32 = p[64 * n + (k & 1) * 32 ..][0..32].*;
            const qh: V32 = p[128 + 32 * n ..][0..32].*;
            const nib_shift: @Vector(32, u3) = @splat(if (k >> 1 == 0) 0 else 4);
            const low = (ql >> nib_shift) & @as(V32, @splat(0x0f));
            const hi_shift: @Vector(32, u3) = @splat(@intCast(2 * k));
            const high = (qh >> hi_shift) & @as(V32, @splat(3));
            const q = low | (high << @as(@Vector(32, u3), @splat(4)));
            return @as(@Vector(32, i8), @bitCast(q)) - @as(@Vector(32, i8), @splat(32));
        },
    }
}

/// Dequantizes one block (its `Block.elements` values) as ggml does.
pub fn dequantize(comptime b: Block, p: [*]const u8, out: []f32) void {
    assert(out.len == Block.elements(b));
    const h = Header(b).of(p);
    for (0..Block.elements(b) / 32) |j| {
        const q = quants(b, p, j);
        for (0..32) |i| {
            const s = h.scale[2 * j + i / 16];
            const v: f32 = @floatFromInt(q[i]);
            out[32 * j + i] = if (Block.signed(b)) s * v else s * v + h.offset[j];
        }
    }
}

/// Dequantizes `cols` weights of one row of any whole-block or float type.
pub fn dequantizeRow(t: TileType, row: [*]const u8, cols: usize, out: []f32) void {
    assert(out.len == cols);
    switch (t) {
        .f32 => for (0..cols) |i| {
            out[i] = @bitCast(std.mem.readInt(u32, row[4 * i ..][0..4], .little));
        },
        .f16 => for (0..cols) |i| {
            out[i] = abi.f16ToF32(std.mem.readInt(u16, row[2 * i ..][0..2], .little));
        },
        .bf16 => for (0..cols) |i| {
            out[i] = @bitCast(@as(u32, std.mem.readInt(u16, row[2 * i ..][0..2], .little)) << 16);
        },
        inline .q4_1, .q5_0, .q5_1, .q4_k, .q5_k, .q6_k => |tt| {
            const b = comptime asBlock(tt).?;
            const e = comptime Block.elements(b);
            assert(cols % e == 0);
            for (0..cols / e) |k| dequantize(b, row + k * Block.bytes(b), out[k * e ..][0..e]);
        },
        .q4_0, .q8_0 => unreachable,
    }
}

// ---------------------------------------------------------------------------
// Tests: the decoders against ggml's dequantization written out element by
// element, as ggml-quants.c `dequantize_row_*` does.
// ---------------------------------------------------------------------------

const testing = std.testing;

fn ggmlK4(j: usize, q: [*]const u8, d: *u8, m: *u8) void {
    if (j < 4) {
        d.* = q[j] & 63;
        m.* = q[j + 4] & 63;
    } else {
        d.* = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m.* = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

/// ggml-quants.c's dequantize_row_* for one block, transcribed loop by loop.
fn ggmlDequant(comptime b: Block, x: [*]const u8, y: []f32) void {
    switch (b) {
        .q4_1 => {
            const d = f16At(x);
            const m = f16At(x + 2);
            for (0..16) |j| {
                const x0: f32 = @floatFromInt(x[4 + j] & 0x0F);
                const x1: f32 = @floatFromInt(x[4 + j] >> 4);
                y[j] = x0 * d + m;
                y[j + 16] = x1 * d + m;
            }
        },
        .q5_0, .q5_1 => {
            const d = f16At(x);
            const m: f32 = if (b == .q5_1) f16At(x + 2) else 0;
            const off: usize = if (b == .q5_0) 2 else 4;
            const qh = std.mem.readInt(u32, x[off..][0..4], .little);
            for (0..16) |j| {
                const sj: u5 = @intCast(j);
                const xh_0: u8 = @truncate(((qh >> sj) << 4) & 0x10);
                const xh_1: u8 = @truncate((qh >> (sj + 12)) & 0x10);
                const qs = x[off + 4 + j];
                if (b == .q5_0) {
                    const x0: i32 = @as(i32, (qs & 0x0F) | xh_0) - 16;
                    const x1: i32 = @as(i32, (qs >> 4) | xh_1) - 16;
                    y[j] = @as(f32, @floatFromInt(x0)) * d;
                    y[j + 16] = @as(f32, @floatFromInt(x1)) * d;
                } else {
                    const x0: f32 = @floatFromInt((qs & 0x0F) | xh_0);
                    const x1: f32 = @floatFromInt((qs >> 4) | xh_1);
                    y[j] = x0 * d + m;
                    y[j + 16] = x1 * d + m;
                }
            }
        },
        .q4_k, .q5_k => {
            const d = f16At(x);
            const min = f16At(x + 2);
            const scales = x + 4;
            var q: [*]const u8 = x + (if (b == .q4_k) @as(usize, 16) else 48);
            const qh = x + 16;
            var is: usize = 0;
            var bit_lo: u8 = 1;
            var bit_hi: u8 = 2;
            var yi: usize = 0;
            var jj: usize = 0;
            while (jj < 256) : (jj += 64) {
                var sc: u8 = undefined;
                var m: u8 = undefined;
                ggmlK4(is + 0, scales, &sc, &m);
                const d1 = d * @as(f32, @floatFromInt(sc));
                const m1 = min * @as(f32, @floatFromInt(m));
                ggmlK4(is + 1, scales, &sc, &m);
                const d2 = d * @as(f32, @floatFromInt(sc));
                const m2 = min * @as(f32, @floatFromInt(m));
                for (0..32) |l| {
                    const h: u8 = if (b == .q5_k and qh[l] & bit_lo != 0) 16 else 0;
                    y[yi] = d1 * @as(f32, @floatFromInt((q[l] & 0xF) + h)) - m1;
                    yi += 1;
                }
                for (0..32) |l| {
                    const h: u8 = if (b == .q5_k and qh[l] & bit_hi != 0) 16 else 0;
                    y[yi] = d2 * @as(f32, @floatFromInt((q[l] >> 4) + h)) - m2;
                    yi += 1;
                }
                q += 32;
                is += 2;
                bit_lo = bit_lo << 2;
                bit_hi = bit_hi << 2;
            }
        },
        .q6_k => {
            const d = f16At(x + 208);
            var ql: [*]const u8 = x;
            var qh: [*]const u8 = x + 128;
            var sc: [*]const u8 = x + 192;
            var yo: usize = 0;
            var n: usize = 0;
            while (n < 256) : (n += 128) {
                for (0..32) |l| {
                    const is = l / 16;
                    const q1: i32 = @as(i32, (ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    const q2: i32 = @as(i32, (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    const q3: i32 = @as(i32, (ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    const q4: i32 = @as(i32, (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    const s = struct {
                        fn at(p: [*]const u8, i: usize) f32 {
                            return @floatFromInt(@as(i8, @bitCast(p[i])));
                        }
                    };
                    y[yo + l + 0] = d * s.at(sc, is + 0) * @as(f32, @floatFromInt(q1));
                    y[yo + l + 32] = d * s.at(sc, is + 2) * @as(f32, @floatFromInt(q2));
                    y[yo + l + 64] = d * s.at(sc, is + 4) * @as(f32, @floatFromInt(q3));
                    y[yo + l + 96] = d * s.at(sc, is + 6) * @as(f32, @floatFromInt(q4));
                }
                yo += 128;
                ql += 64;
                qh += 32;
                sc += 8;
            }
        },
    }
}

test "K-quant scale vectors equal the per-sub-block header" {
    var prng = std.Random.DefaultPrng.init(0x5ca1e5);
    const rng = prng.random();
    inline for (.{ Block.q4_k, Block.q5_k, Block.q6_k }) |b| {
        var blk: [Block.bytes(b)]u8 = undefined;
        for (0..500) |_| {
            rng.bytes(&blk);
            const at: usize = if (b == .q6_k) 208 else 0;
            std.mem.writeInt(u16, blk[at..][0..2], abi.f32ToF16(rng.float(f32)), .little);
            if (b != .q6_k) std.mem.writeInt(u16, blk[2..4], abi.f32ToF16(rng.float(f32)), .little);
            const h = Header(b).of(&blk);
            const v = KScales(b).of(&blk);
            for (0..8) |j| {
                if (b == .q6_k) {
                    try testing.expectEqual(h.scale[2 * j], v.scale[2 * j]);
                    try testing.expectEqual(h.scale[2 * j + 1], v.scale[2 * j + 1]);
                } else {
                    try testing.expectEqual(h.scale[2 * j], v.scale[j]);
                    try testing.expectEqual(h.offset[j], v.offset[j]);
                }
            }
        }
    }
}

test "block decoders equal ggml's dequantization bit for bit" {
    var prng = std.Random.DefaultPrng.init(0x5eed_b10c);
    const rng = prng.random();
    inline for (.{ Block.q4_1, Block.q5_0, Block.q5_1, Block.q4_k, Block.q5_k, Block.q6_k }) |b| {
        var blk: [Block.bytes(b)]u8 = undefined;
        var want: [Block.elements(b)]f32 = undefined;
        var got: [Block.elements(b)]f32 = undefined;
        for (0..200) |_| {
            rng.bytes(&blk);
            // Finite scales spread over many binades: f16 exponent 1..29.
            const scale_at: []const usize = switch (b) {
                .q4_1, .q5_1, .q4_k, .q5_k => &.{ 0, 2 },
                .q5_0 => &.{0},
                .q6_k => &.{208},
            };
            for (scale_at) |at| {
                const bits: u16 = (@as(u16, rng.intRangeAtMost(u5, 1, 29)) << 10) | rng.int(u10) | (@as(u16, rng.int(u1)) << 15);
                std.mem.writeInt(u16, blk[at..][0..2], bits, .little);
            }
            ggmlDequant(b, &blk, &want);
            dequantize(b, &blk, &got);
            for (want, got) |w, g| try testing.expectEqual(@as(u32, @bitCast(w)), @as(u32, @bitCast(g)));
        }
    }
}
