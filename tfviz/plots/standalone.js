/* tfviz's chart drawing for an exported web page (tfviz/standalone.py): no library, no network.
 *
 * It draws the part of plotly's figure JSON that the exported views' figures use (tfviz.plots:
 * heatmaps on category or linear axes, bars, text and ring markers on overlaid axes, dotted
 * lines, paper annotations, one colour axis with its bar) and nothing else; standalone.py checks
 * a figure against that part before choosing this over plotly.js. Its reason to exist is speed:
 * plotly.js is 4.8 MB that a browser parses before the first chart shows (1.2 s, 3x bertviz's
 * page, bench/standalone.py); this is about 36 kB.
 *
 * Every text comes from the figure as plotly reads it (HTML-escaped labels, <br> for a new
 * line) and is drawn on a canvas or put in the hover box as text, never as HTML: a label
 * typed by a user stays inert.
 */
(function () {
  "use strict";

  var FONT = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans CJK SC', sans-serif";
  var INK = "#2a3f5f"; // plotly's default text colour, so a page reads like the app
  var MINUS = "\u2212"; // plotly writes negative numbers with a minus sign, not a hyphen
  var CB_TICK_PX = 5;
  var DEFAULT_MARGIN = { l: 80, r: 80, t: 100, b: 80 }; // plotly's own defaults
  var BAR_COLOUR = "#636efa";

  /* plotly's text markup as plain lines: <br> starts a line, other tags go, entities decoded.
   * Tags are removed before entities are decoded, so an escaped "&lt;b&gt;" stays text. */
  function lines(text) {
    if (text === undefined || text === null) return [];
    return String(text)
      .replace(/<extra>[\s\S]*?<\/extra>/gi, "")
      .split(/<br\s*\/?>/i)
      .map(function (line) {
        return decode(line.replace(/<[^>]*>/g, ""));
      });
  }

  function decode(text) {
    return text.replace(/&(lt|gt|quot|#39|#x27|amp);/g, function (_, name) {
      return { lt: "<", gt: ">", quot: '"', "#39": "'", "#x27": "'", amp: "&" }[name];
    });
  }

  /* A number as d3-format's specifiers that tfviz's hover and cell texts use: [+].N(f|e|g|%). */
  function format(value, spec) {
    if (typeof value !== "number") return value === undefined || value === null ? "" : String(value);
    if (!isFinite(value)) return String(value);
    var m = /^(\+)?(?:\.(\d+))?([efg%])?$/.exec(spec || "");
    if (!spec || !m) return String(value).replace("-", MINUS);
    var digits = m[2] === undefined ? 6 : Number(m[2]);
    var kind = m[3] || "g";
    var text;
    if (kind === "f") text = Math.abs(value).toFixed(digits);
    else if (kind === "e") text = Math.abs(value).toExponential(digits);
    else if (kind === "%") text = (Math.abs(value) * 100).toFixed(digits) + "%";
    else text = Math.abs(value).toPrecision(Math.max(1, digits));
    var zero = Number(text.replace("%", "")) === 0;
    var sign = value < 0 && !zero ? MINUS : m[1] ? "+" : "";
    return sign + text;
  }

  /* A hover or cell template with %{name} and %{name:spec} filled from point. */
  function fill(template, point) {
    return String(template).replace(/%\{(\w+)(?::([^}]*))?\}/g, function (_, name, spec) {
      return format(point[name], spec);
    });
  }

  function rgba(colour) {
    var c = String(colour).trim();
    var m = /^#([0-9a-f]{6})$/i.exec(c);
    if (m) {
      var n = parseInt(m[1], 16);
      return [(n >> 16) & 255, (n >> 8) & 255, n & 255, 1];
    }
    m = /^rgba?\(([^)]*)\)$/i.exec(c);
    if (m) {
      var parts = m[1].split(",").map(Number);
      return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    }
    return [0, 0, 0, 1];
  }

  /* A plotly colour scale ([[position, colour], ...]) with its colours read once, for
   * colourAt: a heatmap's every cell read them anew (a third of a redraw's time). */
  function stopsOf(scale) {
    return scale.map(function (stop) {
      return [stop[0], rgba(stop[1])];
    });
  }

  /* The colour at t in [0, 1] of a colour scale's stops (stopsOf), in RGB. */
  function colourAt(stops, t) {
    t = Math.min(1, Math.max(0, t));
    for (var i = 1; i < stops.length; i++) {
      if (t <= stops[i][0] || i === stops.length - 1) {
        var a = stops[i - 1][1];
        var b = stops[i][1];
        var span = stops[i][0] - stops[i - 1][0];
        var f = span > 0 ? Math.min(1, Math.max(0, (t - stops[i - 1][0]) / span)) : 1;
        return [
          Math.round(a[0] + (b[0] - a[0]) * f),
          Math.round(a[1] + (b[1] - a[1]) * f),
          Math.round(a[2] + (b[2] - a[2]) * f),
        ];
      }
    }
    return stops[0][1].slice(0, 3);
  }

  function css(rgb) {
    return "rgb(" + rgb.join(",") + ")";
  }

  function font(size) {
    return (size || 12) + "px " + FONT;
  }

  /* Round numbers about every `px` pixels across [lo, hi]. */
  function niceTicks(lo, hi, px, length) {
    var a = Math.min(lo, hi);
    var b = Math.max(lo, hi);
    var count = Math.max(2, Math.floor(Math.abs(length) / px));
    var raw = (b - a) / count;
    if (!(raw > 0)) return [a];
    var power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (s) { return s * power; }).find(function (s) {
      return s >= raw;
    });
    var out = [];
    for (var v = Math.ceil(a / step) * step; v <= b + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
    }
    return out;
  }

  /* One axis: its categories (a category axis) or numbers, its range and where it is drawn. */
  function makeAxis(spec, letter) {
    return {
      spec: spec || {},
      letter: letter,
      categories: [],
      index: {},
      numbers: [],
      category: (spec || {}).type === "category",
    };
  }

  function noteValues(axis, values, kind) {
    values.forEach(function (v) {
      if (typeof v === "string" && !axis.category && axis.numbers.length === 0) axis.category = true;
      if (axis.category) {
        if (!(v in axis.index)) {
          axis.index[v] = axis.categories.length;
          axis.categories.push(v);
        }
      } else if (typeof v === "number") axis.numbers.push(v);
    });
    if (kind === "bar" && !axis.category) axis.numbers.push(0);
    if (kind === "cells" && !axis.category && values.length > 1) {
      var half = Math.abs(values[1] - values[0]) / 2;
      axis.numbers.push(values[0] - half, values[values.length - 1] + half);
    }
  }

  function finishAxis(axis) {
    var spec = axis.spec;
    var range;
    if (spec.range) range = spec.range.slice();
    else if (axis.category) range = [-0.5, axis.categories.length - 0.5];
    else if (axis.numbers.length) {
      var lo = Math.min.apply(null, axis.numbers);
      var hi = Math.max.apply(null, axis.numbers);
      if (axis.bars) {
        var pad = (hi - lo) * 0.05 || 1;
        range = [lo < 0 ? lo - pad : lo, hi > 0 ? hi + pad : hi];
      } else range = [lo, hi === lo ? lo + 1 : hi];
    } else range = [-1, 1];
    if (spec.autorange === "reversed") range = [range[1], range[0]];
    axis.range = range;
  }

  function value(axis, v) {
    return axis.category ? axis.index[v] : v;
  }

  /* Pixel position of data value v (a category's index on a category axis). */
  function toPx(axis, v) {
    var r = axis.range;
    var f = (v - r[0]) / (r[1] - r[0]);
    return axis.letter === "x" ? axis.px0 + f * (axis.px1 - axis.px0) : axis.px1 - f * (axis.px1 - axis.px0);
  }

  function fromPx(axis, px) {
    var r = axis.range;
    var f = axis.letter === "x" ? (px - axis.px0) / (axis.px1 - axis.px0) : (axis.px1 - px) / (axis.px1 - axis.px0);
    return r[0] + f * (r[1] - r[0]);
  }

  function axisName(ref, letter) {
    var n = String(ref || letter).slice(1);
    return letter + "axis" + n;
  }

  /* The ticks an axis draws: [[position, text lines], ...], those inside its range only. */
  function ticks(axis, ctx, size) {
    var spec = axis.spec;
    var lo = Math.min(axis.range[0], axis.range[1]);
    var hi = Math.max(axis.range[0], axis.range[1]);
    var inside = function (t) {
      return t[0] >= lo && t[0] <= hi;
    };
    if (spec.visible === false || spec.showticklabels === false) return [];
    // A zoomable map gives every category's label (layout.meta.labels) instead of a few ticks:
    // thinned to what fits the range shown, so zooming in brings back labels a whole map had
    // no room for.
    if (spec.tickvals && !axis.labels) {
      var text = spec.ticktext || spec.tickvals.map(String);
      return thinned(
        axis,
        spec.tickvals
          .map(function (v, i) {
            return [value(axis, v), lines(text[i]).join(" ")];
          })
          .filter(function (t) {
            return t[0] !== undefined && inside(t);
          }),
        ctx,
        size
      );
    }
    if (axis.category) {
      return thinned(
        axis,
        axis.categories
          .map(function (c, i) {
            return [i, lines(axis.labels ? axis.labels[i] : c).join(" ")];
          })
          .filter(inside),
        ctx,
        size
      );
    }
    var length = axis.letter === "x" ? axis.px1 - axis.px0 : axis.px1 - axis.px0;
    return niceTicks(axis.range[0], axis.range[1], axis.letter === "x" ? 70 : 30, length).map(
      function (v) {
        return [v, format(v, Math.abs(v) > 0 && Math.abs(v) < 1e-3 ? ".1e" : "")];
      }
    );
  }

  /* Every k-th of a category axis's ticks (given or its own), k the least that leaves a line of
   * text room between two: a phone's width gives a toy grid's keys ~4 px each, and drawn all
   * they were one smear (plotly draws every given tick; the app hid them on phones). Lines
   * size - 1 px apart still leave the glyphs apart (MiniLM's 34 pieces, 11 px, at ~10 px keep
   * every label). An x axis keeps all whose labels fit side by side unrotated. */
  function thinned(axis, list, ctx, size) {
    if (list.length < 2) return list;
    var spacing = Infinity;
    for (var i = 1; i < list.length; i++) {
      spacing = Math.min(spacing, Math.abs(toPx(axis, list[i][0]) - toPx(axis, list[i - 1][0])));
    }
    var every = Math.max(1, Math.ceil((size - 1) / Math.max(spacing, 1e-6)));
    if (axis.letter === "x") {
      var widest = Math.max.apply(null, list.map(function (t) {
        return ctx.measureText(t[1]).width;
      }));
      if (widest + 4 < spacing) every = 1;
    }
    if (every === 1) return list;
    // Whole labels only, every-th apart at least: a byte piece's continuation mark ("…",
    // tfviz.hf.tokenizer) gives way. Thinned by position alone, a Chinese sentence's pieces
    // kept the marks and dropped the characters (tfviz.plots.mosaic.labelled does the same).
    var last = -Infinity;
    return list.filter(function (t, i) {
      if (String(t[1]).charAt(0) === "\u2026" || i - last < every) return false;
      last = i;
      return true;
    });
  }

  function rotated(axis, tickList, ctx) {
    if (axis.spec.tickangle === -90 || axis.spec.tickangle === 90) return true;
    if (tickList.length < 2) return false;
    var spacing = Math.abs(toPx(axis, tickList[1][0]) - toPx(axis, tickList[0][0]));
    var widest = Math.max.apply(null, tickList.map(function (t) {
      return ctx.measureText(t[1]).width;
    }));
    return widest + 2 > spacing;
  }

  /* Draw one line of text at (x, y) in the current font, and note its box in ctx.__texts
   * (the chart's texts and where they are: the tests check that none overlap). */
  function put(ctx, text, x, y, align, baseline) {
    ctx.textAlign = align;
    ctx.textBaseline = baseline;
    ctx.fillText(text, x, y);
    if (!ctx.__texts || !text) return;
    var w = ctx.measureText(text).width;
    var size = parseFloat(ctx.font);
    var x0 = align === "right" ? x - w : align === "center" ? x - w / 2 : x;
    var y0 = baseline === "top" ? y : baseline === "bottom" ? y - size : y - size / 2;
    ctx.__texts.push({ text: text, x0: x0, x1: x0 + w, y0: y0, y1: y0 + size });
  }

  /* Lines of text from (x, y), anchored by align and baseline. A cell's number is not noted
   * (it lies on its cell, not beside another label). */
  function textBlock(ctx, textLines, x, y, size, align, baseline, colour, cell) {
    ctx.font = font(size);
    ctx.fillStyle = colour || INK;
    var h = size * 1.25;
    var top = baseline === "bottom" ? y - h * textLines.length : baseline === "middle" ? y - (h * textLines.length) / 2 : y;
    var noted = ctx.__texts;
    if (cell) ctx.__texts = null;
    textLines.forEach(function (line, i) {
      put(ctx, line, x, top + h * (i + 0.5), align, "middle");
    });
    ctx.__texts = noted;
  }

  /* Lay the figure out for a width: margins grown to fit tick labels where plotly would. */
  function layoutFor(fig, width, ctx, zoom) {
    var layout = fig.layout || {};
    var margin = Object.assign({}, DEFAULT_MARGIN, layout.margin || {});
    var axes = {};
    var traces = fig.data || [];
    traces.forEach(function (trace) {
      ["x", "y"].forEach(function (letter) {
        var name = axisName(trace[letter + "axis"], letter);
        if (!axes[name]) axes[name] = makeAxis(layout[name], letter);
        var axis = axes[name];
        var values = trace[letter];
        if (trace.type === "heatmap") {
          var n = letter === "x" ? (trace.z[0] || []).length : trace.z.length;
          if (!values) values = Array.from({ length: n }, function (_, i) { return i; });
          noteValues(axis, values, "cells");
        } else if (trace.type === "bar" && letter === "y") {
          axis.bars = true;
          noteValues(axis, values, "bar");
        } else noteValues(axis, values || [], "");
      });
    });
    Object.keys(layout).forEach(function (name) {
      var m = /^([xy])axis\d*$/.exec(name);
      if (m && !axes[name]) axes[name] = makeAxis(layout[name], m[1]);
    });
    Object.keys(axes).forEach(function (name) {
      finishAxis(axes[name]);
    });
    if (zoomable(fig)) {
      ["xaxis", "yaxis"].forEach(function (name) {
        var axis = axes[name];
        if (!axis) return;
        if (axis.category && layout.meta.labels.length === axis.categories.length) axis.labels = layout.meta.labels;
        if (zoom && zoom[name]) axis.range = zoom[name].slice();
      });
    }
    var cb = colourBar(layout);
    var height = layout.height || 450;
    // Margins that hold the main axes' labels and titles, as plotly's automargin grows them.
    var box = { l: margin.l, r: margin.r, t: margin.t, b: margin.b };
    if (cb && cb.vertical) box.r = Math.max(box.r, cb.room);
    var place = function () {
      var pw = Math.max(20, width - box.l - box.r);
      var ph = Math.max(20, height - box.t - box.b);
      Object.keys(axes).forEach(function (name) {
        var axis = axes[name];
        var over = axis.spec.overlaying ? axes[axis.spec.overlaying.replace(/^([xy])/, "$1axis")] : null;
        var domain = (over || axis).spec.domain || [0, 1];
        if (axis.letter === "x") {
          axis.px0 = box.l + domain[0] * pw;
          axis.px1 = box.l + domain[1] * pw;
        } else {
          axis.px0 = box.t + (1 - domain[1]) * ph;
          axis.px1 = box.t + (1 - domain[0]) * ph;
        }
      });
      return { pw: pw, ph: ph };
    };
    var area = place();
    ["xaxis", "yaxis"].forEach(function (name) {
      var axis = axes[name];
      if (!axis || axis.spec.automargin === false || axis.spec.visible === false) return;
      var size = (axis.spec.tickfont || {}).size || 12;
      ctx.font = font(size);
      var list = ticks(axis, ctx, size);
      var widest = Math.max.apply(null, list.map(function (t) { return ctx.measureText(t[1]).width; }).concat([0]));
      var title = axis.spec.title && axis.spec.title.text ? 20 : 0;
      if (axis.letter === "y") box.l = Math.max(box.l, widest + 8 + title);
      else {
        var need = (rotated(axis, list, ctx) ? widest : size * 1.3) + 8 + title;
        if (axis.spec.side === "top") box.t = Math.max(box.t, need);
        else box.b = Math.max(box.b, need);
      }
    });
    area = place();
    return { axes: axes, box: box, width: width, height: height, pw: area.pw, ph: area.ph, cb: cb };
  }

  function colourBar(layout) {
    var axis = layout.coloraxis;
    if (!axis || axis.showscale === false) return null;
    var bar = axis.colorbar || {};
    var vertical = bar.orientation !== "h";
    return { axis: axis, bar: bar, vertical: vertical, room: vertical ? 110 : 0 };
  }

  function heatmapColours(trace, layout) {
    var axis = trace.coloraxis ? layout.coloraxis || {} : trace;
    var z = trace.z;
    var lo = axis.cmin !== undefined ? axis.cmin : trace.zmin;
    var hi = axis.cmax !== undefined ? axis.cmax : trace.zmax;
    if (lo === undefined || hi === undefined) {
      var flat = [].concat.apply([], z).filter(function (v) { return typeof v === "number" && isFinite(v); });
      lo = Math.min.apply(null, flat);
      hi = Math.max.apply(null, flat);
    }
    return { scale: axis.colorscale || trace.colorscale, lo: lo, hi: hi === lo ? lo + 1 : hi };
  }

  var cellCanvas = null;

  function drawHeatmap(ctx, trace, x, y, colours) {
    var z = trace.z;
    var rows = z.length;
    var cols = (z[0] || []).length;
    // One cell a pixel, on a canvas kept for every heatmap (a new one each cost a grid of
    // heads, a chart per head, a third of its redraw).
    var image = cellCanvas || (cellCanvas = document.createElement("canvas"));
    image.width = cols; // clears it, even at the same size
    image.height = rows;
    var pixels = image.getContext("2d").createImageData(cols, rows);
    var stops = stopsOf(colours.scale);
    for (var r = 0; r < rows; r++) {
      for (var c = 0; c < cols; c++) {
        var v = z[r][c];
        if (typeof v !== "number" || !isFinite(v)) continue; // a gap: the page shows through
        var rgb = colourAt(stops, (v - colours.lo) / (colours.hi - colours.lo));
        var k = 4 * (r * cols + c);
        pixels.data[k] = rgb[0];
        pixels.data[k + 1] = rgb[1];
        pixels.data[k + 2] = rgb[2];
        pixels.data[k + 3] = 255;
      }
    }
    image.getContext("2d").putImageData(pixels, 0, 0);
    var xs = trace.x || Array.from({ length: cols }, function (_, i) { return i; });
    var ys = trace.y || Array.from({ length: rows }, function (_, i) { return i; });
    // Cells are evenly spaced along both axes (categories, or numbers one apart): the image is
    // stretched from the first cell's outer edge to the last's, without smoothing.
    var x0 = toPx(x, value(x, xs[0]) - 0.5 * step(x, xs));
    var x1 = toPx(x, value(x, xs[cols - 1]) + 0.5 * step(x, xs));
    var y0 = toPx(y, value(y, ys[0]) - 0.5 * step(y, ys));
    var y1 = toPx(y, value(y, ys[rows - 1]) + 0.5 * step(y, ys));
    ctx.imageSmoothingEnabled = false;
    ctx.save();
    ctx.translate(Math.min(x0, x1), Math.min(y0, y1));
    ctx.scale(x1 < x0 ? -1 : 1, y1 < y0 ? -1 : 1);
    ctx.drawImage(image, x1 < x0 ? -Math.abs(x1 - x0) : 0, y1 < y0 ? -Math.abs(y1 - y0) : 0, Math.abs(x1 - x0), Math.abs(y1 - y0));
    ctx.restore();
    if (trace.texttemplate) {
      var size = (trace.textfont || {}).size || 12;
      for (var rr = 0; rr < rows; rr++) {
        for (var cc = 0; cc < cols; cc++) {
          var val = z[rr][cc];
          if (typeof val !== "number" || !isFinite(val)) continue;
          var cell = colourAt(stops, (val - colours.lo) / (colours.hi - colours.lo));
          var light = 0.299 * cell[0] + 0.587 * cell[1] + 0.114 * cell[2] > 140;
          var said = { z: val, x: xs[cc], y: ys[rr], text: trace.text ? trace.text[rr][cc] : undefined };
          textBlock(ctx, lines(fill(trace.texttemplate, said)), toPx(x, value(x, xs[cc])), toPx(y, value(y, ys[rr])), size, "center", "middle", light ? "#222" : "#fff", true);
        }
      }
    }
  }

  function step(axis, values) {
    if (axis.category || values.length < 2) return 1;
    return Math.abs(values[1] - values[0]);
  }

  function drawBars(ctx, trace, x, y) {
    var colour = (trace.marker || {}).color || BAR_COLOUR;
    var zero = toPx(y, 0);
    ctx.fillStyle = "#444"; // the zero line, which says which bars are negative
    ctx.fillRect(x.px0, Math.round(zero), x.px1 - x.px0, 1);
    trace.x.forEach(function (xv, i) {
      var centre = toPx(x, value(x, xv));
      var half = Math.abs(toPx(x, 0.4) - toPx(x, 0));
      var top = toPx(y, trace.y[i]);
      ctx.fillStyle = Array.isArray(colour) ? colour[i] : colour;
      ctx.fillRect(centre - half, Math.min(zero, top), 2 * half, Math.abs(top - zero));
      if (trace.text && trace.text[i] !== undefined) {
        var up = trace.y[i] >= 0;
        textBlock(ctx, lines(trace.text[i]), centre, top + (up ? -2 : 2), (trace.textfont || {}).size || 12, "center", up ? "bottom" : "top");
      }
    });
  }

  function drawScatter(ctx, trace, x, y) {
    var mode = trace.mode || "markers";
    trace.x.forEach(function (xv, i) {
      var px = toPx(x, value(x, xv));
      var py = toPx(y, value(y, trace.y[i]));
      if (mode.indexOf("markers") >= 0) {
        var marker = trace.marker || {};
        ctx.beginPath();
        ctx.arc(px, py, (marker.size || 6) / 2 + 1, 0, 2 * Math.PI);
        ctx.strokeStyle = marker.color || INK;
        ctx.lineWidth = (marker.line || {}).width || 1;
        ctx.stroke();
      }
      if (mode.indexOf("text") >= 0) {
        var where = trace.textposition || "middle center";
        var base = where.indexOf("top") === 0 ? "bottom" : where.indexOf("bottom") === 0 ? "top" : "middle";
        textBlock(ctx, lines(trace.text[i]), px, py + (base === "bottom" ? -2 : base === "top" ? 2 : 0), (trace.textfont || {}).size || 12, "center", base);
      }
    });
  }

  function drawAxis(ctx, axis, L) {
    var spec = axis.spec;
    if (spec.visible === false) return;
    var size = (spec.tickfont || {}).size || 12;
    ctx.font = font(size);
    var list = ticks(axis, ctx, size);
    var turn = axis.letter === "x" && rotated(axis, list, ctx);
    var widest = 0;
    ctx.fillStyle = INK;
    list.forEach(function (t) {
      var p = toPx(axis, t[0]);
      widest = Math.max(widest, ctx.measureText(t[1]).width);
      if (axis.letter === "y") {
        put(ctx, t[1], xEdge(L, axis) - 4, p, "right", "middle");
      } else {
        var top = spec.side === "top";
        var edge = top ? yEdge(L, axis, true) - 4 : yEdge(L, axis, false) + 4;
        if (turn) {
          ctx.save();
          ctx.translate(p, edge);
          ctx.rotate(-Math.PI / 2);
          ctx.textAlign = top ? "left" : "right";
          ctx.textBaseline = "middle";
          ctx.fillText(t[1], 0, 0);
          ctx.restore();
          var long = ctx.measureText(t[1]).width;
          if (ctx.__texts && t[1]) {
            ctx.__texts.push({ text: t[1], x0: p - size / 2, x1: p + size / 2, y0: top ? edge - long : edge, y1: top ? edge : edge + long });
          }
        } else {
          put(ctx, t[1], p, edge, "center", top ? "bottom" : "top");
        }
      }
    });
    var title = spec.title && spec.title.text;
    if (!title) return;
    var tsize = (spec.title.font || {}).size || 14;
    if (axis.letter === "y") {
      var cx = Math.max(tsize / 2 + 2, xEdge(L, axis) - widest - 10 - tsize / 2);
      var cy = (axis.px0 + axis.px1) / 2;
      var titleLines = lines(title);
      var noted = ctx.__texts;
      ctx.__texts = null; // put() would note the turned text's box unturned: noted below
      ctx.save();
      ctx.translate(cx, cy);
      ctx.rotate(-Math.PI / 2);
      textBlock(ctx, titleLines, 0, 0, tsize, "center", "middle");
      ctx.restore();
      ctx.__texts = noted;
      if (noted) {
        var long = Math.max.apply(null, titleLines.map(function (line) { return ctx.measureText(line).width; }));
        var across = tsize * 1.25 * titleLines.length;
        noted.push({ text: title, x0: cx - across / 2, x1: cx + across / 2, y0: cy - long / 2, y1: cy + long / 2 });
      }
    } else {
      var under = (turn ? widest : size * 1.3) + 8;
      var atTop = spec.side === "top";
      var y = atTop ? yEdge(L, axis, true) - under : yEdge(L, axis, false) + under;
      textBlock(ctx, lines(title), (axis.px0 + axis.px1) / 2, y, tsize, "center", atTop ? "bottom" : "top");
    }
  }

  /* The left pixel of the x axis a y axis is anchored to. */
  function xEdge(L, yAxis) {
    var anchor = yAxis.spec.anchor ? axisName(yAxis.spec.anchor, "x") : "xaxis";
    return (L.axes[anchor] || { px0: L.box.l }).px0;
  }

  /* The top (or bottom) pixel of the y axis an x axis is anchored to. */
  function yEdge(L, xAxis, top) {
    var anchor = xAxis.spec.anchor ? axisName(xAxis.spec.anchor, "y") : "yaxis";
    var y = L.axes[anchor] || { px0: L.box.t, px1: L.box.t + L.ph };
    return top ? y.px0 : y.px1;
  }

  function drawColourBar(ctx, L, fig) {
    var cb = L.cb;
    if (!cb || !cb.axis.colorscale) return;
    var bar = cb.bar;
    var axis = cb.axis;
    var thick = bar.thickness || 30;
    var len = bar.len !== undefined ? bar.len : 1;
    var lo = axis.cmin;
    var hi = axis.cmax;
    if (lo === undefined || hi === undefined) {
      var heat = (fig.data || []).filter(function (t) { return t.type === "heatmap"; })[0];
      var c = heat ? heatmapColours(heat, fig.layout) : { lo: 0, hi: 1 };
      lo = c.lo;
      hi = c.hi;
    }
    var x0;
    var y0;
    var w;
    var h;
    if (cb.vertical) {
      w = thick;
      h = L.ph * len;
      x0 = L.box.l + L.pw + 12;
      y0 = L.box.t + (L.ph - h) / 2;
    } else {
      w = L.pw * len;
      h = thick;
      var paperX = bar.x !== undefined ? bar.x : 0.5;
      var centreX = L.box.l + paperX * L.pw;
      x0 = bar.xanchor === "left" ? centreX : bar.xanchor === "right" ? centreX - w : centreX - w / 2;
      var yv = bar.y !== undefined ? bar.y : -0.1;
      var at = bar.yref === "container" ? (1 - yv) * L.height + (bar.ypad || 0) : L.box.t + (1 - yv) * L.ph;
      y0 = bar.yanchor === "bottom" ? at - h : bar.yanchor === "middle" ? at - h / 2 : at;
      if (bar.yref !== "container" && bar.yanchor === "top") y0 += 4;
    }
    var gradient = cb.vertical ? ctx.createLinearGradient(0, y0 + h, 0, y0) : ctx.createLinearGradient(x0, 0, x0 + w, 0);
    axis.colorscale.forEach(function (stop) {
      gradient.addColorStop(stop[0], css(rgba(stop[1]).slice(0, 3)));
    });
    ctx.fillStyle = gradient;
    ctx.fillRect(x0, y0, w, h);
    ctx.strokeStyle = "#ccc";
    ctx.lineWidth = 1;
    ctx.strokeRect(x0, y0, w, h);
    var values = bar.tickvals || niceTicks(lo, hi, cb.vertical ? 40 : 80, cb.vertical ? h : w);
    var texts = bar.ticktext || values.map(function (v) { return format(v, ""); });
    ctx.font = font(11);
    ctx.fillStyle = INK;
    values.forEach(function (v, i) {
      var f = (v - lo) / (hi - lo);
      if (f < -1e-9 || f > 1 + 1e-9) return;
      if (cb.vertical) put(ctx, lines(texts[i]).join(" "), x0 + w + CB_TICK_PX, y0 + h - f * h, "left", "middle");
      else put(ctx, lines(texts[i]).join(" "), x0 + f * w, y0 + h + 3, "center", "top");
    });
    var title = bar.title && bar.title.text;
    if (title) {
      // A horizontal bar's title before it, as plotly places it: after it, it ran off a
      // narrow column's edge.
      if (cb.vertical) textBlock(ctx, lines(title), x0, y0 - 6, 12, "left", "bottom");
      else textBlock(ctx, lines(title), x0 - 8, y0 + h / 2, 12, "right", "middle");
    }
  }

  function drawAnnotation(ctx, L, a) {
    var x = a.xref === "paper" ? L.box.l + a.x * L.pw : toPx(L.axes[axisName(a.xref, "x")], a.x);
    var y = a.yref === "paper" ? L.box.t + (1 - a.y) * L.ph : toPx(L.axes[axisName(a.yref, "y")], a.y);
    y -= a.yshift || 0;
    var align = a.xanchor === "left" ? "left" : a.xanchor === "right" ? "right" : "center";
    var base = a.yanchor === "bottom" ? "bottom" : a.yanchor === "top" ? "top" : "middle";
    textBlock(ctx, lines(a.text), x, y, (a.font || {}).size || 12, align, base);
  }

  function drawShape(ctx, L, s) {
    if (s.type !== "line") return;
    var x = function (v) {
      return s.xref === "paper" ? L.box.l + v * L.pw : toPx(L.axes[axisName(s.xref, "x")], v);
    };
    var y = function (v) {
      return s.yref === "paper" ? L.box.t + (1 - v) * L.ph : toPx(L.axes[axisName(s.yref, "y")], v);
    };
    var line = s.line || {};
    ctx.save();
    ctx.strokeStyle = line.color || INK;
    ctx.lineWidth = line.width || 2;
    ctx.setLineDash(line.dash === "dot" ? [2, 3] : line.dash === "dash" ? [6, 4] : []);
    ctx.beginPath();
    ctx.moveTo(x(s.x0), y(s.y0));
    ctx.lineTo(x(s.x1), y(s.y1));
    ctx.stroke();
    ctx.restore();
  }

  /* Draw div's figure on its canvas at the page's pixel ratio, and say it is drawn. */
  function draw(div) {
    var began = performance.now();
    var canvas = div.__canvas;
    var drawn = paint(div.__figure, canvas, div.clientWidth || 600, window.devicePixelRatio || 1, div.__zoom);
    var L = drawn.layout;
    var title = drawn.title;
    // A screen reader has no pixels to read: the canvas names its chart (title, block titles).
    var names = title ? [lines(title).join(" ")] : [];
    (div.__figure.data || []).forEach(function (trace) {
      if (trace.type === "scatter" && trace.mode === "text" && trace.text) {
        names.push(trace.text.map(function (t) { return lines(t).join(" "); }).join(", "));
      }
    });
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", names.join(": ") || "chart");
    div.__layout = L;
    div.__texts = drawn.texts;
    div.__width = L.width;
    div.setAttribute("data-drawn", "1");
    if (div.__reset) div.__reset.style.display = div.__zoom ? "block" : "none";
    // For whoever waits for the chart (a test, bench/ui_latency's harness): it is drawn now.
    div.dispatchEvent(new CustomEvent("tfviz:drawn", { bubbles: true, detail: { began: began } }));
  }

  /* Draw fig on canvas, width CSS pixels wide, at dpr device pixels per CSS pixel; returns
   * its layout, its title and the texts drawn with their boxes. */
  function paint(fig, canvas, width, dpr, zoom) {
    var ctx = canvas.getContext("2d");
    var L = layoutFor(fig, width, ctx, zoom);
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(L.height * dpr);
    canvas.style.width = width + "px";
    canvas.style.height = L.height + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.__texts = [];
    var layout = fig.layout || {};
    // White paper, as plotly's figures have it: the page behind may be dark (Streamlit's dark
    // theme), and the figure's colours were chosen on white.
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, width, L.height);
    if (layout.plot_bgcolor && rgba(layout.plot_bgcolor)[3] > 0) {
      ctx.fillStyle = layout.plot_bgcolor;
      ctx.fillRect(L.box.l, L.box.t, L.pw, L.ph);
    }
    ctx.save();
    if (zoom) {
      // Zoomed in: the cells beyond the range shown stay out of the margins.
      ctx.beginPath();
      ctx.rect(L.box.l, L.box.t, L.pw, L.ph);
      ctx.clip();
    }
    (fig.data || []).forEach(function (trace) {
      var x = L.axes[axisName(trace.xaxis, "x")];
      var y = L.axes[axisName(trace.yaxis, "y")];
      if (trace.type === "heatmap") drawHeatmap(ctx, trace, x, y, heatmapColours(trace, layout));
      else if (trace.type === "bar") drawBars(ctx, trace, x, y);
      else if (trace.type === "scatter") drawScatter(ctx, trace, x, y);
    });
    ctx.restore();
    Object.keys(L.axes).forEach(function (name) {
      drawAxis(ctx, L.axes[name], L);
    });
    (layout.shapes || []).forEach(function (s) { drawShape(ctx, L, s); });
    (layout.annotations || []).forEach(function (a) { drawAnnotation(ctx, L, a); });
    drawColourBar(ctx, L, fig);
    var title = layout.title && layout.title.text;
    if (title) textBlock(ctx, lines(title), width / 2, 10, (layout.title.font || {}).size || 17, "center", "top");
    return { layout: L, title: title, texts: ctx.__texts };
  }

  /* The chart as a PNG file named `name`, drawn anew at twice its size (sharp on a slide);
   * saved by the browser, nothing sent anywhere. */
  function savePng(div, name) {
    var canvas = document.createElement("canvas");
    paint(div.__figure, canvas, div.clientWidth || 600, 2, div.__zoom);
    canvas.toBlob(function (blob) {
      var link = document.createElement("a");
      link.href = URL.createObjectURL(blob);
      link.download = name + ".png";
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(function () { URL.revokeObjectURL(link.href); }, 10000);
    }, "image/png");
  }

  /* What a point under (px, py) says in its trace's hovertemplate, or null. Ring markers win
   * over the heatmap under them, as in plotly (they hold a clipped cell's true value). */
  function hoverAt(div, px, py) {
    var fig = div.__figure;
    var L = div.__layout;
    var found = null;
    (fig.data || []).forEach(function (trace) {
      if (!trace.hovertemplate || trace.hoverinfo === "skip") return;
      var x = L.axes[axisName(trace.xaxis, "x")];
      var y = L.axes[axisName(trace.yaxis, "y")];
      var point = null;
      if (trace.type === "heatmap") {
        if (!inPlot(L, [px, py])) return;
        var xs = trace.x || trace.z[0].map(function (_, i) { return i; });
        var ys = trace.y || trace.z.map(function (_, i) { return i; });
        var c = nearest(x, xs, fromPx(x, px));
        var r = nearest(y, ys, fromPx(y, py));
        if (c < 0 || r < 0) return;
        var z = trace.z[r][c];
        if (typeof z !== "number" || !isFinite(z)) return;
        point = { x: xs[c], y: ys[r], z: z, customdata: trace.customdata ? trace.customdata[r][c] : undefined, text: trace.text ? trace.text[r][c] : undefined };
      } else if (trace.type === "bar") {
        var i = nearest(x, trace.x, fromPx(x, px));
        if (i < 0 || py < L.box.t || py > L.box.t + L.ph) return;
        point = { x: trace.x[i], y: trace.y[i] };
      } else if (trace.type === "scatter") {
        trace.x.forEach(function (xv, j) {
          var dx = toPx(x, value(x, xv)) - px;
          var dy = toPx(y, value(y, trace.y[j])) - py;
          if (dx * dx + dy * dy <= 36) {
            point = { x: xv, y: trace.y[j], customdata: trace.customdata ? trace.customdata[j] : undefined };
          }
        });
      }
      if (point) found = lines(fill(trace.hovertemplate, point));
    });
    return found;
  }

  /* The index of the cell or bar whose slot holds data value v, or -1. */
  function nearest(axis, values, v) {
    var s = step(axis, values);
    var first = value(axis, values[0]);
    if (axis.category) {
      var i = Math.round(v);
      var name = axis.categories[i];
      return name === undefined ? -1 : values.indexOf(name);
    }
    var k = Math.round((v - first) / s);
    return k >= 0 && k < values.length ? k : -1;
  }

  function attachHover(div) {
    var tip = document.createElement("div");
    tip.className = "tfviz-hover";
    div.appendChild(tip);
    var show = function (event) {
      var rect = div.__canvas.getBoundingClientRect();
      var px = event.clientX - rect.left;
      var py = event.clientY - rect.top;
      var text = hoverAt(div, px, py);
      if (!text) {
        tip.style.display = "none";
        return;
      }
      tip.textContent = text.join("\n");
      tip.style.display = "block";
      var left = px + 12;
      if (left + tip.offsetWidth > div.clientWidth) left = Math.max(0, px - 12 - tip.offsetWidth);
      tip.style.left = left + "px";
      tip.style.top = py + 12 + "px";
    };
    div.__canvas.addEventListener("mousemove", show);
    div.__canvas.addEventListener("click", show); // a tap on a phone
    div.__canvas.addEventListener("mouseleave", function () {
      tip.style.display = "none";
    });
  }

  /* Whether pixel p ([x, y] in the canvas) is inside layout L's plot area. */
  function inPlot(L, p) {
    return p[0] >= L.box.l && p[0] <= L.box.l + L.pw && p[1] >= L.box.t && p[1] <= L.box.t + L.ph;
  }

  /* A figure that asks to be zoomed (layout.dragmode "zoom", with every category's label in
   * layout.meta.labels): tfviz.plots.attention_map, one head or a layer enlarged. */
  function zoomable(fig) {
    var layout = fig.layout || {};
    return layout.dragmode === "zoom" && !!layout.meta && Array.isArray(layout.meta.labels);
  }

  /* The whole cells a drag from pixel a to pixel b covers on a category axis, as a range in
   * the axis's own direction (a reversed axis stays reversed). */
  function cellRange(axis, a, b) {
    var u = fromPx(axis, a);
    var v = fromPx(axis, b);
    var n = axis.categories.length;
    var lo = Math.max(0, Math.round(Math.min(u, v))) - 0.5;
    var hi = Math.min(n - 1, Math.round(Math.max(u, v))) + 0.5;
    return axis.range[0] > axis.range[1] ? [hi, lo] : [lo, hi];
  }

  /* Drag a rectangle over a zoomable chart to see those cells, their labels thinned anew for
   * the room they have; double-click, or the button that then shows, to see it whole again. */
  function attachZoom(div, resetLabel) {
    var box = document.createElement("div");
    box.className = "tfviz-zoombox";
    div.appendChild(box);
    if (resetLabel) {
      // Named in the page's language (a button without a name is one a screen reader skips).
      var reset = document.createElement("button");
      reset.className = "tfviz-reset";
      reset.type = "button";
      reset.textContent = "\u27f2";
      reset.title = resetLabel;
      reset.setAttribute("aria-label", resetLabel);
      reset.addEventListener("click", function () {
        div.__zoom = null;
        draw(div);
      });
      div.appendChild(reset);
      div.__reset = reset;
    }
    var start = null;
    var at = function (event) {
      var rect = div.__canvas.getBoundingClientRect();
      return [event.clientX - rect.left, event.clientY - rect.top];
    };
    var clamp = function (p) {
      var L = div.__layout;
      return [Math.min(Math.max(p[0], L.box.l), L.box.l + L.pw), Math.min(Math.max(p[1], L.box.t), L.box.t + L.ph)];
    };
    div.__canvas.addEventListener("mousedown", function (event) {
      if (event.button !== 0 || !zoomable(div.__figure) || !inPlot(div.__layout, at(event))) return;
      start = at(event);
      event.preventDefault(); // no text selection while dragging
    });
    window.addEventListener("mousemove", function (event) {
      if (!start) return;
      var p = clamp(at(event));
      box.style.display = "block";
      box.style.left = Math.min(start[0], p[0]) + "px";
      box.style.top = Math.min(start[1], p[1]) + "px";
      box.style.width = Math.abs(p[0] - start[0]) + "px";
      box.style.height = Math.abs(p[1] - start[1]) + "px";
    });
    window.addEventListener("mouseup", function (event) {
      if (!start) return;
      var p = clamp(at(event));
      var from = start;
      start = null;
      box.style.display = "none";
      if (Math.abs(p[0] - from[0]) < 5 || Math.abs(p[1] - from[1]) < 5) return; // a click
      var L = div.__layout;
      div.__zoom = {
        xaxis: cellRange(L.axes.xaxis, from[0], p[0]),
        yaxis: cellRange(L.axes.yaxis, from[1], p[1]),
      };
      draw(div);
    });
    div.__canvas.addEventListener("dblclick", function () {
      if (!div.__zoom) return;
      div.__zoom = null;
      draw(div);
    });
  }

  var TYPED = {
    i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array,
    i4: Int32Array, u4: Uint32Array, f4: Float32Array, f8: Float64Array,
  };

  /* plotly's JSON writes a numpy array as {dtype, bdata (base64, little-endian), shape}: back
   * to plain arrays (rows of a 2-d one), NaN for a gap as plotly.js reads it. */
  function unpack(v) {
    if (Array.isArray(v)) return v.map(unpack);
    if (!v || typeof v !== "object") return v;
    if (typeof v.bdata === "string" && TYPED[v.dtype]) {
      var text = atob(v.bdata);
      var bytes = new Uint8Array(text.length);
      for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
      var flat = Array.from(new TYPED[v.dtype](bytes.buffer));
      var shape = String(v.shape || flat.length).split(",").map(Number);
      if (shape.length === 1) return flat;
      var cols = shape[1];
      return Array.from({ length: shape[0] }, function (_, r) { return flat.slice(r * cols, (r + 1) * cols); });
    }
    var out = {};
    Object.keys(v).forEach(function (k) { out[k] = unpack(v[k]); });
    return out;
  }

  var BLOCK_TOP_PX = 24; // a block's own top margin below the first: room for its title

  /* A column of equal blocks (tfviz.plots.attention's columns of heads: layout.meta.blocks =
   * {rows, gap, starts}, the blocks' titles in its "block titles" text trace) as one figure per
   * block, in order: [{figure, name, start}], start where the block opens a row of a grid (a
   * layer's first head). Each has its block's rows of every per-cell array, its title, its
   * rows' tick labels and the column's key labels under it; the colour bar stays on the first
   * (the others' top margins hold their titles only, and the grid lines their plots up at the
   * bottom). Laid out one block a cell of a grid (the app's canvas charts), they read row by
   * row on a wide screen and in order on a phone's one column. Any other figure: itself. */
  function blocks(figure) {
    var fig = { data: unpack(figure.data || []), layout: figure.layout || {}, unpacked: true };
    var layout = fig.layout;
    var spec = (layout.meta || {}).blocks;
    var heat = fig.data.filter(function (t) { return t.type === "heatmap"; })[0];
    var titles = fig.data.filter(function (t) { return t.meta === "block titles"; })[0];
    if (!spec || !heat || !titles) return [{ figure: fig, name: null, start: false }];
    var total = heat.z.length;
    var margin = Object.assign({}, DEFAULT_MARGIN, layout.margin || {});
    var rowPx = ((layout.height || 450) - margin.t - margin.b) / total;
    var ya = layout.yaxis || {};
    return titles.text.map(function (name, i) {
      var first = i * (spec.rows + spec.gap);
      var cells = {};
      Object.keys(heat).forEach(function (k) {
        var v = heat[k];
        cells[k] = k !== "x" && Array.isArray(v) && v.length === total ? v.slice(first, first + spec.rows) : v;
      });
      var mine = {};
      (cells.y || []).forEach(function (n) { mine[n] = true; });
      var keep = (ya.tickvals || []).map(function (v, k) { return mine[v] ? k : -1; }).filter(function (k) { return k >= 0; });
      var top = i === 0 ? margin.t : BLOCK_TOP_PX;
      var sub = Object.assign({}, layout, {
        height: Math.round(spec.rows * rowPx) + top + margin.b,
        margin: Object.assign({}, margin, { t: top }),
        yaxis: Object.assign({}, ya, {
          tickvals: keep.map(function (k) { return ya.tickvals[k]; }),
          ticktext: keep.map(function (k) { return (ya.ticktext || ya.tickvals)[k]; }),
        }),
        yaxis2: Object.assign({}, layout.yaxis2, { range: [spec.rows - 0.5, -0.5] }),
        meta: { block: name },
      });
      if (i > 0 && layout.coloraxis) sub.coloraxis = Object.assign({}, layout.coloraxis, { showscale: false });
      var title = Object.assign({}, titles, { x: [titles.x[i]], y: [-0.5], text: [name] });
      var data = fig.data.map(function (t) { return t === heat ? cells : t === titles ? title : t; });
      return {
        figure: { data: data, layout: sub, unpacked: true },
        name: lines(name).join(" "),
        start: (spec.starts || []).indexOf(i) >= 0,
      };
    });
  }

  /* Draw figure (plotly JSON) into the element div, or draw div's chart again with a new
   * figure (the app's next run); redrawn whenever div's width changes (a resized window, a
   * phone turned, Streamlit's sidebar opened). save: {file, label}, a button that saves the
   * chart as file.png, labelled for a screen reader and a tooltip; none without it. */
  function mount(div, figure, save) {
    div.classList.add("tfviz-chart");
    var before = div.__figure;
    div.__figure = figure.unpacked ? figure : { data: unpack(figure.data || []), layout: figure.layout || {} };
    div.__save = save;
    // A zoom outlives a rerun that keeps the map's tokens (W_o switched, another head), not
    // one that changes them (another text).
    var same = before && JSON.stringify(((before.layout || {}).meta || {}).labels) ===
      JSON.stringify((div.__figure.layout.meta || {}).labels);
    if (!same) div.__zoom = null;
    if (!div.__canvas) {
      var canvas = document.createElement("canvas");
      div.appendChild(canvas);
      div.__canvas = canvas;
      attachHover(div);
      attachZoom(div, save && save.reset);
      if (save) {
        // As plotly's camera: a button over the chart's corner that saves it as a picture.
        var button = document.createElement("button");
        button.className = "tfviz-save";
        button.type = "button";
        button.textContent = "PNG";
        button.addEventListener("click", function () {
          savePng(div, div.__save.file);
        });
        div.appendChild(button);
      }
      new ResizeObserver(function () {
        if (div.clientWidth !== div.__width) draw(div);
      }).observe(div);
    }
    var button = div.querySelector(".tfviz-save");
    if (button) {
      button.title = save.label;
      button.setAttribute("aria-label", save.label);
    }
    draw(div);
  }

  /* Lay figures out in the element `grid` (its id, or itself; CSS class tfviz-charts, GRID_CSS
   * in standalone.py) as a grid `columns` cells to a row, one under the other on a phone, and
   * draw them: a column of heads a cell per head (blocks), so its heads read row by row, a
   * layer's first opening a row; any other figure a cell. Cells already there are drawn again
   * (the app's next run). save(i): cell i's save button ({file, label, reset}), or none. */
  function grid(where, figures, columns, save) {
    var box = element(where);
    box.classList.add("tfviz-charts");
    box.style.setProperty("--tfviz-columns", columns);
    var cells = [].concat.apply([], figures.map(blocks));
    while (box.children.length > cells.length) box.lastChild.remove();
    cells.forEach(function (cell, i) {
      var div = box.children[i] || box.appendChild(document.createElement("div"));
      div.style.gridColumnStart = cell.start ? "1" : "";
      if (cell.name) div.setAttribute("data-block", cell.name);
      else div.removeAttribute("data-block");
      if (box.id) div.id = box.id + "-" + i; // an exported page's cell: tfviz-chart-0-1
      mount(div, cell.figure, save ? save(i) : undefined);
    });
  }

  /* Draw figure into the element with id `id` (an exported page's charts). */
  window.tfvizChart = function (id, figure) {
    mount(document.getElementById(id), figure);
  };
  window.tfvizChart.mount = mount;
  window.tfvizChart.blocks = blocks;
  window.tfvizChart.grid = grid;
  function element(chart) {
    return typeof chart === "string" ? document.getElementById(chart) : chart;
  }

  /* What the hover says at (px, py) of a chart (its id, or its element), or null. */
  window.tfvizChart.hoverAt = function (chart, px, py) {
    return hoverAt(element(chart), px, py);
  };
  /* The centre, in CSS pixels of the chart's canvas, of cell (row, col) of its trace'th trace
   * (a heatmap) in a chart (its id, or its element): where the tests read a colour and hover. */
  window.tfvizChart.cellAt = function (chart, trace, row, col) {
    var div = element(chart);
    var t = div.__figure.data[trace];
    var L = div.__layout;
    var x = L.axes[axisName(t.xaxis, "x")];
    var y = L.axes[axisName(t.yaxis, "y")];
    var xs = t.x || t.z[0].map(function (_, i) { return i; });
    var ys = t.y || t.z.map(function (_, i) { return i; });
    return [toPx(x, value(x, xs[col])), toPx(y, value(y, ys[row]))];
  };
  window.tfvizChart.format = format;
})();
