//! The packed decode layout (docs/KERNELS.md, "Packed 16-row panels"), and
//! packing from `.cflow` tiles into it.
//!
//! A packed matrix is a sequence of *panels*, one per 16 output rows (the
//! last padded with zero rows). A panel holds one *record* per group of 32
//! input columns, left to right:
//!
//!   16 f16 scales, one per row                              32 bytes
//!   Q8_0: 8 chunks of 64 bytes; chunk c holds, for rows 0..15 in turn, the
//!         4 weights of columns 4c..4c+3 as unsigned bytes (q XOR 0x80)  512 bytes
//!   Q4_0: 4 chunks of 64 bytes; chunk c holds, for rows 0..15 in turn,
//!         ggml bytes 4c..4c+3 of the row's block (low nibbles: columns
//!         4c..4c+3, high nibbles: columns 16+4c..16+4c+3)               256 bytes
//!
//! so one 64-byte load feeds one `vpdpbusd` for 16 outputs against 4
//! broadcast activation bytes. A record is exactly 16 ggml blocks (544 or
//! 288 bytes): packing moves bytes, it neither adds nor drops any. Q4_1
//! records put the 16 rows' f16 mins after the scales (320 bytes), Q5_0
//! records the rows' 32-bit fifth-bit words `qh` (352 bytes); both keep
//! Q4_0's nibble chunks. Q4_K and Q6_K have records of 256 columns ("K
//! records", below). Fused
//! runs (Q/K/V, gate/up) pack member after member, each padded to whole
//! panels. This file knows bytes only; it is compiled into the root (for
//! packing) and into every kernel variant (for the layout constants).

const std = @import("std");
const abi = @import("abi.zig");

const assert = std.debug.assert;
const qk = abi.qk;

pub const panel_rows: usize = 16;
pub const scale_bytes: usize = panel_rows * 2;

/// Source tile geometry (docs/FORMAT.md).
pub const tile_rows: usize = 128;
pub const tile_cols: usize = 256;
pub const tile_header_bytes: usize = 16;

/// Q4_1 records hold 16 f16 mins after the scales (value = d q + m); its
/// source tiles keep ggml's whole 20-byte blocks (docs/FORMAT.md). Q4_K and
/// Q6_K records cover a 256-column super-block ("K records", below).
pub const Quant = enum(u32) { q4_0 = 1, q8_0 = 2, q4_1 = 3, q4_k = 4, q6_k = 5, q5_0 = 6 };

/// The K-quant records: one per 256-column super-block of 16 rows.
pub fn isK(q: Quant) bool {
    return q == .q4_k or q == .q6_k;
}

/// Columns one record covers: 32, or a 256-column super-block.
pub fn recordCols(q: Quant) usize {
    return if (isK(q)) 256 else qk;
}

/// Weight bytes of one row's group in a source tile (32-column records).
pub fn groupBytes(q: Quant) usize {
    return switch (q) {
        .q4_0, .q4_1, .q5_0 => 16,
        .q8_0 => 32,
        .q4_k, .q6_k => unreachable,
    };
}

/// Bytes of a record before its weight chunks: 16 f16 scales, and for
/// Q4_1 16 f16 mins after them, for Q5_0 the rows' 32-bit `qh` words (bit j:
/// the fifth bit of column j) (32-column records).
pub fn headBytes(q: Quant) usize {
    assert(!isK(q));
    return switch (q) {
        .q4_1 => 2 * scale_bytes,
        .q5_0 => scale_bytes + panel_rows * 4,
        else => scale_bytes,
    };
}

/// Tile types whose tiles keep ggml's blocks whole (Q4_1, Q5_0): the rest
/// of the group records hold the scales apart from the quants.
pub fn wholeBlocks(q: Quant) bool {
    return q == .q4_1 or q == .q5_0;
}

/// Bytes of one ggml block of the type (a row's block in a source tile).
pub fn blockBytes(q: Quant) usize {
    return switch (q) {
        .q4_k => 144,
        .q6_k => 210,
        else => headBytes(q) / panel_rows + groupBytes(q),
    };
}

/// K records. Q4_K (value = d sc_j q - dmin m_j, six-bit sc_j and m_j per
/// 32 columns, q in 0..15), 2,368 bytes:
///
///   d, dmin: 16 f16 each, row 0..15                           64 bytes
///   sc[j][row]: the six-bit scales widened to u8              128 bytes
///   m: the six-bit mins widened to u8, in two 64-byte quads h = 0..1:
///     for rows 0..15 in turn, m[4 h ..][0..4] of the row (so one
///     4-byte lane of a vector holds four of a row's mins)       128 bytes
///   pair l = 0..3, chunk c = 0..7: 64 bytes, for rows 0..15 in turn
///     ggml bytes qs[32 l + 4 c ..][0..4] of the row's block: low
///     nibbles columns 64 l + 4 c.., high nibbles 64 l + 32 + 4 c..   2,048 bytes
///
/// (the block's 12 packed scale bytes become 16: 2.8% more than ggml's 144
/// bytes per row). Q6_K (value = d sc_k (q - 32), int8 sc_k per 16
/// columns, q in 0..63), 3,360 bytes, exactly ggml's 210 per row:
///
///   d: 16 f16                                                 32 bytes
///   sc[k][row], k = 0..15: int8                               256 bytes
///   half n = 0..1, chunk c = 0..7: three 64-byte pieces A, B, H holding
///     for rows 0..15 ggml's ql[64 n + 4 c ..][0..4], ql[64 n + 32 + 4 c
///     ..][0..4] and qh[32 n + 4 c ..][0..4]: A's low nibbles are columns
///     128 n + 4 c.., B's low 128 n + 32 + 4 c.., A's high 128 n + 64 +
///     4 c.., B's high 128 n + 96 + 4 c..; H's bit pairs 0-1, 2-3, 4-5, 6-7
///     are the top two bits of those four                      3,072 bytes
pub const k4_d: usize = 0;
pub const k4_dmin: usize = 32;
pub const k4_sc: usize = 64;
pub const k4_m: usize = 192;

/// Where row `lane`'s min of sub-block `j` lies in a Q4_K record.
pub inline fn k4MinAt(j: usize, lane: usize) usize {
    return k4_m + (j / 4) * 64 + lane * 4 + j % 4;
}
pub const k4_q: usize = 320;
pub const k6_d: usize = 0;
pub const k6_sc: usize = 32;
pub const k6_q: usize = 288;

/// Bytes of one packed record (16 rows x `recordCols` columns).
pub fn recordBytes(q: Quant) usize {
    return switch (q) {
        .q4_k => k4_q + 4 * 8 * 64,
        .q6_k => k6_q + 2 * 8 * 3 * 64,
        else => headBytes(q) + panel_rows * groupBytes(q),
    };
}

comptime {
    assert(recordBytes(.q8_0) == 16 * abi.q8_0_block_bytes);
    assert(recordBytes(.q4_0) == 16 * abi.q4_0_block_bytes);
    assert(recordBytes(.q4_1) == 16 * 20 and blockBytes(.q4_1) == 20);
    assert(recordBytes(.q5_0) == 16 * 22 and blockBytes(.q5_0) == 22);
    assert(recordBytes(.q4_k) == 16 * (144 + 4) and recordBytes(.q6_k) == 16 * 210);
}

pub fn groupsOf(cols: usize) usize {
    return (cols + qk - 1) / qk;
}

/// Records of one panel row: 32-column groups, or whole super-blocks.
pub fn recordsOf(q: Quant, cols: usize) usize {
    if (isK(q)) {
        assert(cols % 256 == 0);
        return cols / 256;
    }
    return groupsOf(cols);
}

pub fn panelsOf(rows: usize) usize {
    return (rows + panel_rows - 1) / panel_rows;
}

/// Bytes of one source tile of rows x cols.
pub fn tileBytes(q: Quant, rows: usize, cols: usize) usize {
    if (isK(q)) return tile_header_bytes + rows * (cols / 256) * blockBytes(q);
    return tile_header_bytes + rows * groupsOf(cols) * blockBytes(q);
}

/// Bytes of one source output stripe: its column tiles.
pub fn stripeBytes(q: Quant, tr: usize, cols: usize) usize {
    var total: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += tile_cols) total += tileBytes(q, tr, @min(tile_cols, cols - c0));
    return total;
}

pub const max_members: usize = 8;

/// A tiled run of 1..8 matrices interleaved by output stripe, as `.cflow`
/// stores fused projections; offsets are relative to the run's start. Each
/// member has its own type (a Q4_K_M file's Q6_K `attn_v` beside Q4_K `q`
/// and `k`): its source tiles and its packed panels are in that type, and
/// the packed run holds member after member, each member's panels whole.
pub const Run = struct {
    /// Each member's type.
    qs: [max_members]Quant,
    cols: usize,
    n_members: usize,
    rows: [max_members]usize,

    /// A run of one matrix of `rows` x `cols` in type q.
    pub fn one(q: Quant, rows: usize, cols: usize) Run {
        var r = Run{ .qs = undefined, .cols = cols, .n_members = 1, .rows = undefined };
        @memset(&r.qs, q);
        @memset(&r.rows, 0);
        r.rows[0] = rows;
        return r;
    }

    pub fn stripes(self: *const Run, m: usize) usize {
        return (self.rows[m] + tile_rows - 1) / tile_rows;
    }

    pub fn stripeRows(self: *const Run, m: usize, s: usize) usize {
        return @min(tile_rows, self.rows[m] - s * tile_rows);
    }

    /// Byte length of the source run.
    pub fn sourceBytes(self: *const Run) usize {
        var total: usize = 0;
        for (0..self.n_members) |m| {
            for (0..self.stripes(m)) |s| total += stripeBytes(self.qs[m], self.stripeRows(m, s), self.cols);
        }
        return total;
    }

    /// Offset of member m's stripe s in the source run.
    pub fn stripeOffset(self: *const Run, m: usize, s: usize) usize {
        var pos: usize = 0;
        for (0..s + 1) |si| {
            for (0..self.n_members) |mi| {
                if (si >= self.stripes(mi)) continue;
                if (si == s and mi == m) return pos;
                pos += stripeBytes(self.qs[mi], self.stripeRows(mi, si), self.cols);
            }
        }
        unreachable;
    }

    pub fn panels(self: *const Run) usize {
        var total: usize = 0;
        for (0..self.n_members) |m| total += panelsOf(self.rows[m]);
        return total;
    }

    /// Bytes of one panel of member m.
    pub fn panelBytes(self: *const Run, m: usize) usize {
        return recordsOf(self.qs[m], self.cols) * recordBytes(self.qs[m]);
    }

    /// Offset of member m's first panel in the packed run (m = n_members:
    /// the packed run's length).
    pub fn packedOffset(self: *const Run, m: usize) usize {
        assert(m <= self.n_members);
        var total: usize = 0;
        for (0..m) |mi| total += panelsOf(self.rows[mi]) * self.panelBytes(mi);
        return total;
    }

    /// Byte length of the packed run.
    pub fn packedBytes(self: *const Run) usize {
        return self.packedOffset(self.n_members);
    }
};

/// Packs panel `p` of member `m` (rows 16p..16p+15 of that matrix) from the
/// source run `src` into `dst` (one panel, `run.panelBytes(m)` bytes).
pub fn packPanel(run: *const Run, src: []const u8, m: usize, p: usize, dst: []u8) void {
    assert(m < run.n_members and p < panelsOf(run.rows[m]));
    assert(dst.len == run.panelBytes(m));
    if (isK(run.qs[m])) return packPanelK(run, src, m, p, dst);
    const q = run.qs[m];
    const gb = groupBytes(q);
    const rec = recordBytes(q);
    const r0 = p * panel_rows;
    const s = r0 / tile_rows;
    const tr = run.stripeRows(m, s);
    const stripe = run.stripeOffset(m, s);
    var tile_pos: usize = stripe;
    var g_global: usize = 0;
    var c0: usize = 0;
    while (c0 < run.cols) : (c0 += tile_cols) {
        const tc: usize = @min(tile_cols, run.cols - c0);
        const ng = groupsOf(tc);
        const scales = tile_pos + tile_header_bytes;
        const data = scales + tr * ng * 2;
        for (0..ng) |g| {
            const out = dst[(g_global + g) * rec ..][0..rec];
            for (0..panel_rows) |lane| {
                const r = r0 + lane;
                const local = r - s * tile_rows;
                const real = r < run.rows[m];
                // Q4_0/Q8_0 tiles hold the scales apart; Q4_1 and Q5_0 tiles whole
                // blocks (d, then m or qh, then the quants).
                const block = scales + (local * ng + g) * blockBytes(q);
                const sp = if (wholeBlocks(q)) block else scales + (local * ng + g) * 2;
                // Scale and min (zero for padding rows).
                out[lane * 2] = if (real) src[sp] else 0;
                out[lane * 2 + 1] = if (real) src[sp + 1] else 0;
                if (q == .q4_1) {
                    out[scale_bytes + lane * 2] = if (real) src[block + 2] else 0;
                    out[scale_bytes + lane * 2 + 1] = if (real) src[block + 3] else 0;
                }
                if (q == .q5_0) {
                    for (0..4) |b| out[scale_bytes + lane * 4 + b] = if (real) src[block + 2 + b] else 0;
                }
                const wp = if (wholeBlocks(q)) block + headBytes(q) / panel_rows else data + (local * ng + g) * gb;
                const w = if (real) src[wp..][0..gb] else &zero_group;
                const n_chunks = gb / 4;
                for (0..n_chunks) |c| {
                    const dst4 = out[headBytes(q) + c * 64 + lane * 4 ..][0..4];
                    for (0..4) |b| {
                        dst4[b] = switch (q) {
                            .q8_0 => if (real) w[4 * c + b] ^ 0x80 else 0x80,
                            .q4_0 => if (real) w[4 * c + b] else 0x88,
                            .q4_1, .q5_0 => w[4 * c + b],
                            .q4_k, .q6_k => unreachable,
                        };
                    }
                }
            }
        }
        g_global += ng;
        tile_pos += tileBytes(q, tr, tc);
    }
    assert(g_global == groupsOf(run.cols));
}

const zero_group = [_]u8{0} ** 32;

/// K records: packing and unpacking (packing_k.zig).
const packing_k = @import("packing_k.zig");
const packPanelK = packing_k.packPanelK;
pub const scaleMinK4 = packing_k.scaleMinK4;
pub const unpackRecordK = packing_k.unpackRecordK;

/// One token's quantized activations as the packed and tiled kernels read
/// them: `ng` ggml Q8_0 blocks, then each block's scale as f32 (the f16
/// value, widened), then each block's sum of quantized values as i32 (for
/// the unsigned-weight correction). Rows are 64-byte aligned.
pub const ActRow = struct {
    pub fn scalesOffset(ng: usize) usize {
        return std.mem.alignForward(usize, ng * abi.q8_0_block_bytes, 4);
    }
    pub fn sumsOffset(ng: usize) usize {
        return scalesOffset(ng) + ng * 4;
    }
    pub fn bytes(ng: usize) usize {
        return std.mem.alignForward(usize, sumsOffset(ng) + ng * 4, 64);
    }
};

/// Dequantizes row `r` of member `m` from a packed run into `out` (cols floats).
pub fn unpackRow(run: *const Run, packed_run: []const u8, m: usize, r: usize, out: []f32) void {
    assert(m < run.n_members and r < run.rows[m]);
    assert(out.len == run.cols);
    const q = run.qs[m];
    const pb = run.panelBytes(m);
    const lane = r % panel_rows;
    const rec = recordBytes(q);
    const base = packed_run[run.packedOffset(m) + (r / panel_rows) * pb ..][0..pb];
    if (isK(q)) {
        for (0..recordsOf(q, run.cols)) |sb| unpackRecordK(q, base[sb * rec ..][0..rec], lane, out[sb * 256 ..][0..256]);
        return;
    }
    for (0..groupsOf(run.cols)) |g| {
        const record = base[g * rec ..][0..rec];
        const d = abi.f16ToF32(@as(u16, record[lane * 2]) | (@as(u16, record[lane * 2 + 1]) << 8));
        const head = headBytes(q);
        for (0..qk) |j| {
            const col = g * qk + j;
            if (col >= run.cols) break;
            const jj = j % 16;
            const byte = record[head + (jj / 4) * 64 + lane * 4 + jj % 4];
            const nibble: i32 = if (j < 16) byte & 15 else byte >> 4;
            const v: i32 = switch (q) {
                .q8_0 => @as(i32, record[head + (j / 4) * 64 + lane * 4 + j % 4]) - 128,
                .q4_0 => nibble - 8,
                .q4_1 => nibble,
                .q5_0 => blk: {
                    const qh = std.mem.readInt(u32, record[scale_bytes + lane * 4 ..][0..4], .little);
                    break :blk (nibble | @as(i32, @intCast((qh >> @intCast(j)) & 1)) << 4) - 16;
                },
                .q4_k, .q6_k => unreachable,
            };
            out[col] = @as(f32, @floatFromInt(v)) * d;
            if (q == .q4_1) {
                // ggml: x * d + m.
                const mn = abi.f16ToF32(@as(u16, record[scale_bytes + lane * 2]) | (@as(u16, record[scale_bytes + lane * 2 + 1]) << 8));
                out[col] += mn;
            }
        }
    }
}

const testing = std.testing;

/// Builds a source run of one matrix from row-major ggml blocks.
fn tileFromBlocks(q: Quant, rows: usize, cols: usize, blocks: []const u8, out: []u8) void {
    const gb = groupBytes(q);
    const bb = blockBytes(q);
    const ng_total = groupsOf(cols);
    var pos: usize = 0;
    var r0: usize = 0;
    while (r0 < rows) : (r0 += tile_rows) {
        const tr: usize = @min(tile_rows, rows - r0);
        var c0: usize = 0;
        while (c0 < cols) : (c0 += tile_cols) {
            const tc: usize = @min(tile_cols, cols - c0);
            const ng = groupsOf(tc);
            @memset(out[pos..][0..tile_header_bytes], 0);
            const scales = pos + tile_header_bytes;
            const data = scales + tr * ng * 2;
            for (0..tr) |r| {
                for (0..ng) |g| {
                    const blk = blocks[((r0 + r) * ng_total + c0 / qk + g) * bb ..][0..bb];
                    if (wholeBlocks(q)) {
                        @memcpy(out[scales + (r * ng + g) * bb ..][0..bb], blk);
                        continue;
                    }
                    out[scales + (r * ng + g) * 2] = blk[0];
                    out[scales + (r * ng + g) * 2 + 1] = blk[1];
                    @memcpy(out[data + (r * ng + g) * gb ..][0..gb], blk[2..]);
                }
            }
            pos += tileBytes(q, tr, tc);
        }
    }
}

test "packing then unpacking gives back every weight, padding rows included" {
    var prng = std.Random.DefaultPrng.init(7);
    const rng = prng.random();
    for ([_]Quant{ .q4_0, .q8_0, .q4_1, .q5_0 }) |q| {
        for ([_][2]usize{ .{ 16, 32 }, .{ 40, 288 }, .{ 130, 64 }, .{ 3, 544 } }) |shape| {
            const rows = shape[0];
            const cols = shape[1];
            const bb = blockBytes(q);
            const blocks = try testing.allocator.alloc(u8, rows * groupsOf(cols) * bb);
            defer testing.allocator.free(blocks);
            for (0..rows * groupsOf(cols)) |b| {
                const d = abi.f32ToF16(rng.float(f32) + 0.01);
                blocks[b * bb] = @truncate(d);
                blocks[b * bb + 1] = @truncate(d >> 8);
                rng.bytes(blocks[b * bb + 2 ..][0 .. bb - 2]);
                if (q == .q4_1) {
                    const mn = abi.f32ToF16(rng.float(f32) - 0.5);
                    blocks[b * bb + 2] = @truncate(mn);
                    blocks[b * bb + 3] = @truncate(mn >> 8);
                }
            }
            const run = Run.one(q, rows, cols);
            const src = try testing.allocator.alloc(u8, run.sourceBytes());
            defer testing.allocator.free(src);
            tileFromBlocks(q, rows, cols, blocks, src);
            const dst = try testing.allocator.alloc(u8, run.packedBytes());
            defer testing.allocator.free(dst);
            for (0..panelsOf(rows)) |p| packPanel(&run, src, 0, p, dst[p * run.panelBytes(0) ..][0..run.panelBytes(0)]);
            const row = try testing.allocator.alloc(f32, cols);
            defer testing.allocator.free(row);
            for (0..rows) |r| {
                unpackRow(&run, dst, 0, r, row);
                for (0..cols) |c| {
                    const blk = blocks[(r * groupsOf(cols) + c / qk) * bb ..][0..bb];
                    const d = abi.f16ToF32(@as(u16, blk[0]) | (@as(u16, blk[1]) << 8));
                    const j = c % qk;
                    const v: i32 = switch (q) {
                        .q8_0 => @as(i8, @bitCast(blk[2 + j])),
                        .q4_0 => @as(i32, if (j < 16) blk[2 + j] & 15 else blk[2 + j - 16] >> 4) - 8,
                        .q4_1 => @as(i32, if (j < 16) blk[4 + j] & 15 else blk[4 + j - 16] >> 4),
                        // ggml: ((nibble | fifth bit << 4) - 16) * d, qh little-endian at 2..6.
                        .q5_0 => (@as(i32, if (j < 16) blk[6 + j] & 15 else blk[6 + j - 16] >> 4) |
                            (@as(i32, @intCast((std.mem.readInt(u32, blk[2..6], .little) >> @intCast(j)) & 1)) << 4)) - 16,
                        .q4_k, .q6_k => unreachable,
                    };
                    var want = @as(f32, @floatFromInt(v)) * d;
                    if (q == .q4_1) want += abi.f16ToF32(@as(u16, blk[2]) | (@as(u16, blk[3]) << 8));
                    try testing.expectEqual(want, row[c]);
                }
            }
            // Padding rows have zero scales.
            if (rows % panel_rows != 0) {
                const last = dst[(panelsOf(rows) - 1) * run.panelBytes(0) ..];
                const lane = rows % panel_rows;
                try testing.expectEqual(@as(u8, 0), last[lane * 2]);
            }
        }
    }
}

test "a run of members of different types packs each member as a run of its own would" {
    var prng = std.Random.DefaultPrng.init(5);
    const rng = prng.random();
    const cols = 288;
    const types = [_]Quant{ .q5_0, .q8_0, .q5_0 };
    const rows = [_]usize{ 40, 24, 130 };
    var run = Run.one(types[0], rows[0], cols);
    run.n_members = types.len;
    for (types, rows, 0..) |q, n, m| {
        run.qs[m] = q;
        run.rows[m] = n;
    }
    // Each member's source tiles on its own, then interleaved by stripe.
    var own: [types.len][]u8 = undefined;
    for (types, rows, 0..) |q, n, m| {
        const bb = blockBytes(q);
        const src_blocks = try testing.allocator.alloc(u8, n * groupsOf(cols) * bb);
        defer testing.allocator.free(src_blocks);
        for (0..n * groupsOf(cols)) |b| {
            const d = abi.f32ToF16(rng.float(f32) + 0.01);
            src_blocks[b * bb] = @truncate(d);
            src_blocks[b * bb + 1] = @truncate(d >> 8);
            rng.bytes(src_blocks[b * bb + 2 ..][0 .. bb - 2]);
        }
        own[m] = try testing.allocator.alloc(u8, Run.one(q, n, cols).sourceBytes());
        tileFromBlocks(q, n, cols, src_blocks, own[m]);
    }
    defer for (own) |o| testing.allocator.free(o);
    const src = try testing.allocator.alloc(u8, run.sourceBytes());
    defer testing.allocator.free(src);
    for (types, rows, 0..) |q, n, m| {
        const alone = Run.one(q, n, cols);
        for (0..alone.stripes(0)) |s| {
            const to = run.stripeOffset(m, s);
            const from = alone.stripeOffset(0, s);
            const len = stripeBytes(q, @min(tile_rows, n - s * tile_rows), cols);
            @memcpy(src[to..][0..len], own[m][from..][0..len]);
        }
    }
    const dst = try testing.allocator.alloc(u8, run.packedBytes());
    defer testing.allocator.free(dst);
    for (0..types.len) |m| {
        const pb = run.panelBytes(m);
        for (0..panelsOf(rows[m])) |p| packPanel(&run, src, m, p, dst[run.packedOffset(m) + p * pb ..][0..pb]);
    }
    try testing.expectEqual(run.packedBytes(), run.packedOffset(types.len));
    var got: [cols]f32 = undefined;
    var want: [cols]f32 = undefined;
    for (types, rows, 0..) |q, n, m| {
        const alone = Run.one(q, n, cols);
        const packed_alone = try testing.allocator.alloc(u8, alone.packedBytes());
        defer testing.allocator.free(packed_alone);
        const pb = alone.panelBytes(0);
        for (0..panelsOf(n)) |p| packPanel(&alone, own[m], 0, p, packed_alone[p * pb ..][0..pb]);
        try testing.expectEqualSlices(u8, packed_alone, dst[run.packedOffset(m)..][0..packed_alone.len]);
        for (0..n) |r| {
            unpackRow(&run, dst, m, r, &got);
            unpackRow(&alone, packed_alone, 0, r, &want);
            try testing.expectEqualSlices(f32, &want, &got);
        }
    }
}
