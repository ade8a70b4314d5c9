import type { State } from "../state";

/** A screen builds its DOM once (`mount`) and then patches it from the state (`render`). */
export interface Screen {
  mount(main: HTMLElement): void;
  render(state: State): void;
  unmount(): void;
}
