// The lag chart: an SVG line over (up to) the last hour, drawn from the server's in-memory
// history (GET /api/v1/changefeeds/{id}/lag). Gaps (null: nothing ran) break the line.

const NS = "http://www.w3.org/2000/svg";
const W = 720, H = 180, LEFT = 48, BOTTOM = 22, TOP = 10, RIGHT = 10;

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// The x axis spans the history kept, at least five minutes and at most the window (an
// hour): a server that started a minute ago shows that minute, not a spike at the edge.
const MIN_SPAN = 300;

function span(history, now) {
  const first = history.points.length ? history.points[0][0] : now;
  return Math.min(history.window, Math.max(MIN_SPAN, now - first));
}

export function lagChart(history, now) {
  const window = span(history, now);
  const points = history.points;
  const top = Math.max(1, ...points.map((p) => p[1] ?? 0));
  const x = (t) => LEFT + ((t - (now - window)) / window) * (W - LEFT - RIGHT);
  const y = (v) => H - BOTTOM - (v / top) * (H - BOTTOM - TOP);
  const root = svg("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
    "aria-label": `lag over the last hour, ${points.length} samples`,
  });
  root.append(svg("line", { x1: LEFT, y1: y(0), x2: W - RIGHT, y2: y(0), class: "axis" }));
  root.append(svg("line", { x1: LEFT, y1: TOP, x2: LEFT, y2: y(0), class: "axis" }));
  root.append(svg("text", { x: LEFT - 6, y: TOP + 8, class: "tick", "text-anchor": "end" },
    `${top.toFixed(top < 10 ? 1 : 0)} s`));
  root.append(svg("text", { x: LEFT - 6, y: y(0), class: "tick", "text-anchor": "end" }, "0"));
  const step = window <= 600 ? 1 : window <= 1800 ? 5 : 15;
  for (let minutes = 0; minutes * 60 <= window + 1; minutes += step) {
    root.append(svg("text", { x: x(now - minutes * 60), y: H - 4, class: "tick", "text-anchor": "middle" },
      minutes ? `-${minutes} min` : "now"));
  }
  let run = [];
  const flush = () => {
    if (run.length === 1) {
      const [px, py] = run[0];
      root.append(svg("circle", { cx: px, cy: py, r: 2.5, class: "dot" }));
    } else if (run.length > 1) {
      root.append(svg("polyline", { points: run.map((p) => p.join(",")).join(" "), class: "line" }));
    }
    run = [];
  };
  for (const [t, v] of points) {
    if (v === null) flush();
    else run.push([x(t).toFixed(1), y(v).toFixed(1)]);
  }
  flush();
  return root;
}
