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
//! 288 bytes): packing moves bytes, it neither adds nor drops any. Fused
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
/// source tiles keep ggml's whole 20-byte blocks (docs/FORMAT.md).
pub const Quant = enum(u32) { q4_0 = 1, q8_0 = 2, q4_1 = 3 };

/// Weight bytes of one row's group in a source tile.
pub fn groupBytes(q: Quant) usize {
    return switch (q) {
        .q4_0, .q4_1 => 16,
        .q8_0 => 32,
    };
}

/// Bytes of a record before its weight chunks: 16 f16 scales, and for
/// Q4_1 16 f16 mins after them.
pub fn headBytes(q: Quant) usize {
    return if (q == .q4_1) 2 * scale_bytes else scale_bytes;
}

/// Bytes of one ggml block of the type (a row's group in a source tile).
pub fn blockBytes(q: Quant) usize {
    return headBytes(q) / panel_rows + groupBytes(q);
}

/// Bytes of one packed record (16 rows x 32 columns).
pub fn recordBytes(q: Quant) usize {
    return headBytes(q) + panel_rows * groupBytes(q);
}

comptime {
    assert(recordBytes(.q8_0) == 16 * abi.q8_0_block_bytes);
    assert(recordBytes(.q4_0) == 16 * abi.q4_0_block_bytes);
    assert(recordBytes(.q4_1) == 16 * 20 and blockBytes(.q4_1) == 20);
}

pub fn groupsOf(cols: usize) usize {
    return (cols + qk - 1) / qk;
}

pub fn panelsOf(rows: usize) usize {
    return (rows + panel_rows - 1) / panel_rows;
}

/// Bytes of one source tile of rows x cols.
pub fn tileBytes(q: Quant, rows: usize, cols: usize) usize {
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
/// stores fused projections; offsets are relative to the run's start.
pub const Run = struct {
    q: Quant,
    cols: usize,
    n_members: usize,
    rows: [max_members]usize,

    pub fn stripes(self: *const Run, m: usize) usize {
        return (self.rows[m] + tile_rows - 1) / tile_rows;
    }

    fn stripeRows(self: *const Run, m: usize, s: usize) usize {
        return @min(tile_rows, self.rows[m] - s * tile_rows);
    }

    /// Byte length of the source run.
    pub fn sourceBytes(self: *const Run) usize {
        var total: usize = 0;
        for (0..self.n_members) |m| {
            for (0..self.stripes(m)) |s| total += stripeBytes(self.q, self.stripeRows(m, s), self.cols);
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
                pos += stripeBytes(self.q, self.stripeRows(mi, si), self.cols);
            }
        }
        unreachable;
    }

    pub fn panels(self: *const Run) usize {
        var total: usize = 0;
        for (0..self.n_members) |m| total += panelsOf(self.rows[m]);
        return total;
    }

    pub fn panelBytes(self: *const Run) usize {
        return groupsOf(self.cols) * recordBytes(self.q);
    }

    /// Byte length of the packed run.
    pub fn packedBytes(self: *const Run) usize {
        return self.panels() * self.panelBytes();
    }
};

/// Packs panel `p` of member `m` (rows 16p..16p+15 of that matrix) from the
/// source run `src` into `dst` (one panel, `run.panelBytes()` bytes).
pub fn packPanel(run: *const Run, src: []const u8, m: usize, p: usize, dst: []u8) void {
    assert(m < run.n_members and p < panelsOf(run.rows[m]));
    assert(dst.len == run.panelBytes());
    const q = run.q;
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
                // Q4_0/Q8_0 tiles hold the scales apart; Q4_1 tiles whole blocks (d, m, quants).
                const block = scales + (local * ng + g) * 20;
                const sp = if (q == .q4_1) block else scales + (local * ng + g) * 2;
                // Scale and min (zero for padding rows).
                out[lane * 2] = if (real) src[sp] else 0;
                out[lane * 2 + 1] = if (real) src[sp + 1] else 0;
                if (q == .q4_1) {
                    out[scale_bytes + lane * 2] = if (real) src[block + 2] else 0;
                    out[scale_bytes + lane * 2 + 1] = if (real) src[block + 3] else 0;
                }
                const wp = if (q == .q4_1) block + 4 else data + (local * ng + g) * gb;
                const w = if (real) src[wp..][0..gb] else &zero_group;
                const n_chunks = gb / 4;
                for (0..n_chunks) |c| {
                    const dst4 = out[headBytes(q) + c * 64 + lane * 4 ..][0..4];
                    for (0..4) |b| {
                        dst4[b] = switch (q) {
                            .q8_0 => if (real) w[4 * c + b] ^ 0x80 else 0x80,
                            .q4_0 => if (real) w[4 * c + b] else 0x88,
                            .q4_1 => w[4 * c + b],
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
    var panel: usize = 0;
    for (0..m) |mi| panel += panelsOf(run.rows[mi]);
    panel += r / panel_rows;
    const lane = r % panel_rows;
    const rec = recordBytes(run.q);
    const base = packed_run[panel * run.panelBytes() ..][0..run.panelBytes()];
    for (0..groupsOf(run.cols)) |g| {
        const record = base[g * rec ..][0..rec];
        const d = abi.f16ToF32(@as(u16, record[lane * 2]) | (@as(u16, record[lane * 2 + 1]) << 8));
        const head = headBytes(run.q);
        for (0..qk) |j| {
            const col = g * qk + j;
            if (col >= run.cols) break;
            const jj = j % 16;
            const byte = record[head + (jj / 4) * 64 + lane * 4 + jj % 4];
            const nibble: i32 = if (j < 16) byte & 15 else byte >> 4;
            const v: i32 = switch (run.q) {
                .q8_0 => @as(i32, record[head + (j / 4) * 64 + lane * 4 + j % 4]) - 128,
                .q4_0 => nibble - 8,
                .q4_1 => nibble,
            };
            out[col] = @as(f32, @floatFromInt(v)) * d;
            if (run.q == .q4_1) {
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
                    if (q == .q4_1) {
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
    for ([_]Quant{ .q4_0, .q8_0, .q4_1 }) |q| {
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
            var run = Run{ .q = q, .cols = cols, .n_members = 1, .rows = undefined };
            run.rows[0] = rows;
            const src = try testing.allocator.alloc(u8, run.sourceBytes());
            defer testing.allocator.free(src);
            tileFromBlocks(q, rows, cols, blocks, src);
            const dst = try testing.allocator.alloc(u8, run.packedBytes());
            defer testing.allocator.free(dst);
            for (0..panelsOf(rows)) |p| packPanel(&run, src, 0, p, dst[p * run.panelBytes() ..][0..run.panelBytes()]);
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
                    };
                    var want = @as(f32, @floatFromInt(v)) * d;
                    if (q == .q4_1) want += abi.f16ToF32(@as(u16, blk[2]) | (@as(u16, blk[3]) << 8));
                    try testing.expectEqual(want, row[c]);
                }
            }
            // Padding rows have zero scales.
            if (rows % panel_rows != 0) {
                const last = dst[(panelsOf(rows) - 1) * run.panelBytes() ..];
                const lane = rows % panel_rows;
                try testing.expectEqual(@as(u8, 0), last[lane * 2]);
            }
        }
    }
}
