// shear.mjs: canvasGeometry, run in the page (page.evaluate) over the
// RDP canvas, measures whether the remote screen's straight lines came
// out straight. rdp.mjs uses it on xrdp's login screen.
//
// Why: IronRDP's web client (0.7.0) shears a bitmap whose width on the
// wire is padded beyond its destination rectangle (xrdp pads every
// bitmap to a multiple of 4 pixels): each row lands 1-3 pixels further
// left than the one above, so a vertical line comes out as a slant of
// 1-3 pixels per row, in bands (docs/consoles.md). Not a golden image:
// the measure is structural.
//
// It finds the dialog (the box around every pixel not of the screen's
// most common colour), marks the colour changes between horizontal
// neighbours inside it (not on its outer edge, which a sheared bitmap
// keeps straight since it fills its rectangle), and reports
//   - left, right: the longest vertical run of such changes in the left
//     and right quarter of the dialog (its borders: as tall as the dialog
//     when straight, one band's rows when sheared);
//   - slants: per slope s (1-3 pixels per row, either way), how many
//     chains of changes run at that constant slope for at least
//     `minRows` rows (a sheared vertical edge; straight text and curves
//     hardly make any that long).
export function canvasGeometry(minRows) {
  const c = document.querySelector('iron-remote-desktop')?.shadowRoot?.querySelector('canvas');
  if (!c || !c.width) return { found: false };
  const w = c.width, h = c.height;
  const copy = document.createElement('canvas');
  copy.width = w; copy.height = h;
  const g = copy.getContext('2d');
  g.drawImage(c, 0, 0);
  const d = g.getImageData(0, 0, w, h).data;
  const px = (x, y) => { const i = (y * w + x) * 4; return (d[i] << 16) | (d[i + 1] << 8) | d[i + 2]; };
  const counts = new Map();
  for (let i = 0; i < d.length; i += 4) {
    const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  let bg = 0, most = -1;
  for (const [k, n] of counts) if (n > most) { most = n; bg = k; }
  let L = w, R = -1, T = h, B = -1;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if (px(x, y) === bg) continue;
      if (x < L) L = x;
      if (x > R) R = x;
      if (y < T) T = y;
      if (y > B) B = y;
    }
  }
  const base = { found: R >= 0, width: w, height: h, colours: counts.size, other: w * h - most };
  if (R < 0) return base;
  const bw = R - L + 1, bh = B - T + 1;
  const edge = new Uint8Array(bw * bh); // colour change between x-1 and x
  let sum = 0;
  for (let y = 0; y < bh; y++) {
    for (let x = 1; x < bw; x++) {
      const p = px(L + x, T + y);
      sum = (sum * 31 + p) >>> 0;
      if (p !== px(L + x - 1, T + y)) edge[y * bw + x] = 1;
    }
  }
  const slopes = [1, -1, 2, -2, 3, -3];
  const run = new Uint16Array(bw);
  const prev = slopes.map(() => new Uint16Array(bw));
  const cur = slopes.map(() => new Uint16Array(bw));
  const slants = Object.fromEntries(slopes.map((s) => [s, 0]));
  let left = 0, right = 0;
  for (let y = 0; y < bh; y++) {
    for (let x = 1; x < bw; x++) {
      const e = edge[y * bw + x];
      run[x] = e ? run[x] + 1 : 0;
      if (x < bw / 4) left = Math.max(left, run[x]);
      if (x > (3 * bw) / 4) right = Math.max(right, run[x]);
      slopes.forEach((s, i) => {
        // a chain goes on from (x-s, y-1) when this change is not the
        // continuation of a vertical one
        const from = x - s;
        const up = y > 0 && edge[(y - 1) * bw + x];
        const v = e ? 1 + (y > 0 && !up && from > 0 && from < bw ? prev[i][from] : 0) : 0;
        cur[i][x] = v;
        if (v === minRows) slants[s]++;
      });
    }
    slopes.forEach((_, i) => { const t = prev[i]; prev[i] = cur[i]; cur[i] = t; cur[i].fill(0); });
  }
  return {
    ...base, box: { left: L, top: T, width: bw, height: bh }, left, right, slants,
    slanted: Object.values(slants).reduce((a, b) => a + b, 0), sum,
    png: copy.toDataURL('image/png'),
  };
}
