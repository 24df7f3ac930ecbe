// A tiny element builder: every text goes through textContent, never innerHTML, so a
// table name, a DDL statement or an error message can never become markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    // through the CSSOM: the page's Content-Security-Policy refuses style attributes
    else if (name === "style") Object.assign(el.style, value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function seconds(value) {
  if (value === null || value === undefined) return "-";
  if (value < 60) return `${Math.round(value)} s`;
  if (value < 3600) return `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
  return `${Math.floor(value / 3600)} h ${Math.round((value % 3600) / 60)} min`;
}

export function clock(unix) {
  if (!unix) return "-";
  return new Date(unix * 1000).toLocaleTimeString();
}

export function rate(value) {
  return value ? `${Math.round(value).toLocaleString()} rows/s` : "-";
}
