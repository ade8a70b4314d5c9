// A few DOM helpers: elements are built with createElement and text with textContent, never from
// HTML strings (the CSP requires Trusted Types for that, and the console has no need of it).

type Attributes = Record<string, string | boolean | number | null | undefined>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, ...children);
  return element;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
}

export function clear(element: Element): void {
  element.replaceChildren();
}

/** Sets the text of an element only when it changed (no needless layout, no lost selection). */
export function setText(element: Element, text: string): void {
  if (element.textContent !== text) {
    element.textContent = text;
  }
}

/** A failure as people read it: its title, then its detail. */
export function failureBox(failure: { title: string; detail: string }, id?: string): HTMLElement {
  return h(
    "div",
    { class: "failure", role: "alert", id },
    h("strong", { class: "failure-title" }, failure.title),
    " ",
    h("span", { class: "failure-detail" }, failure.detail),
  );
}

export function formatTime(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function statusLabel(status: string): string {
  return status === "CancellationRequested" ? "Cancellation requested" : status;
}
