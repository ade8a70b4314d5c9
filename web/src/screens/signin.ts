// Sign in: one button that starts the authorization code + PKCE flow (auth.ts), and the reason the
// user is here when there is one (the session expired, they signed out, a sign-in failed).
import { h } from "../dom";
import type { State } from "../state";
import type { Screen } from "./screen";

export class SignInScreen implements Screen {
  private notice: HTMLElement | null = null;

  constructor(private readonly signIn: () => void) {}

  mount(main: HTMLElement): void {
    this.notice = h("p", { class: "notice", id: "signin-notice", role: "status" });
    const button = h("button", { type: "button", id: "sign-in", class: "primary" }, "Sign in");
    button.addEventListener("click", () => {
      button.disabled = true;
      this.signIn();
    });
    main.replaceChildren(
      h(
        "section",
        { class: "signin", "aria-labelledby": "signin-title" },
        h("h1", { id: "signin-title" }, "Sign in to outlast"),
        h("p", {}, "Submit long-running LLM jobs and follow them as they run."),
        this.notice,
        button,
      ),
    );
  }

  render(state: State): void {
    if (this.notice !== null) {
      this.notice.textContent = state.signInNotice ?? "";
      this.notice.hidden = state.signInNotice === null;
    }
  }

  unmount(): void {
    this.notice = null;
  }
}
