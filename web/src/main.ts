// The console's entry point: configuration, the session, the router and the render loop.
import "./console.css";
import { Actions } from "./actions";
import { Api } from "./api/client";
import {
  beginSignIn,
  completeSignIn,
  forgetSession,
  isExpired,
  isSignInCallback,
  SignInError,
  type Session,
  signOut,
  storedSession,
} from "./auth";
import { BudgetPanel } from "./budget";
import { type Config, loadConfig } from "./config";
import { failureBox, h, setText } from "./dom";
import { Live } from "./live";
import { JobScreen } from "./screens/job";
import { JobsScreen } from "./screens/jobs";
import type { Screen } from "./screens/screen";
import { SignInScreen } from "./screens/signin";
import { SubmitScreen } from "./screens/submit";
import { clearUserData, getState, initialDetail, type Route, type State, subscribe, update } from "./state";

const EXPIRED = "Your session expired. Sign in again.";
const ENDED = "Your session has ended. Sign in again.";

function element(id: string): HTMLElement {
  const found = document.getElementById(id);
  if (found === null) {
    throw new Error(`index.html has no #${id}`);
  }
  return found;
}

function routeOf(hash: string): Route {
  const job = /^#\/jobs\/([0-9a-f-]{36})$/.exec(hash);
  if (job?.[1] !== undefined) {
    return { screen: "job", jobId: job[1] };
  }
  if (hash === "#/submit") {
    return { screen: "submit" };
  }
  return { screen: "jobs" };
}

function routeKey(route: Route): string {
  return route.screen === "job" ? `job:${route.jobId}` : route.screen;
}

class App {
  private readonly main = element("main");
  private readonly nav = element("nav");
  private readonly account = element("account");
  private readonly liveLine = element("live");
  private readonly budget: BudgetPanel;
  private readonly api: Api;
  private readonly actions: Actions;
  private readonly live: Live;
  private screen: Screen | null = null;
  private screenKey = "";
  private expiry: number | null = null;

  constructor(private readonly config: Config) {
    this.api = new Api({
      baseUrl: config.apiUrl,
      token: () => getState().session?.idToken ?? null,
      onUnauthorized: () => this.endSession(ENDED),
    });
    this.budget = new BudgetPanel(element("budget"), this.api);
    this.actions = new Actions(
      this.api,
      (hash) => {
        if (window.location.hash === hash) {
          this.routeChanged();
        } else {
          window.location.hash = hash;
        }
      },
      {
        follow: (jobId, after) => this.live.follow(jobId, after),
        unfollow: (jobId) => this.live.unfollow(jobId),
      },
    );
    this.live = new Live(this.api, {
      job: (document) => this.actions.received(document),
      output: (event) => this.actions.outputReceived(event),
      mode: (mode) =>
        update((s) => {
          s.live = mode;
        }),
      refresh: () => this.actions.refresh(),
    });
    this.buildChrome();
    subscribe((state) => this.render(state));
    window.addEventListener("hashchange", () => this.routeChanged());
  }

  async start(): Promise<void> {
    let session: Session | null = null;
    let notice: string | null = null;
    if (isSignInCallback(window.location)) {
      try {
        const done = await completeSignIn(this.config.auth, window.location);
        session = done.session;
        window.history.replaceState(null, "", new URL(this.config.auth.redirectUri).pathname + done.returnTo);
      } catch (error) {
        notice = error instanceof SignInError ? error.message : "The sign-in did not complete. Sign in again.";
        window.history.replaceState(null, "", new URL(this.config.auth.redirectUri).pathname);
      }
    } else {
      session = storedSession();
      if (session !== null && isExpired(session)) {
        forgetSession();
        session = null;
        notice = EXPIRED;
      }
    }
    update((s) => {
      s.config = this.config;
      s.signInNotice = notice;
      s.route = routeOf(window.location.hash);
    });
    if (session !== null) {
      this.beginSession(session);
    } else {
      this.render(getState());
    }
  }

  private beginSession(session: Session): void {
    update((s) => {
      s.session = session;
      s.signInNotice = null;
    });
    // The console leaves for the sign-in screen the moment the token expires, before any call fails.
    const ms = Math.max(0, session.expiresAt * 1000 - Date.now());
    this.expiry = window.setTimeout(() => this.endSession(EXPIRED), Math.min(ms, 2 ** 31 - 1));
    this.live.start();
    this.budget.refresh();
    this.routeChanged();
  }

  /** Back to sign in: the token expired or the API refused it. Nothing of the user's stays. */
  private endSession(notice: string): void {
    if (getState().session === null) {
      return;
    }
    if (this.expiry !== null) {
      window.clearTimeout(this.expiry);
      this.expiry = null;
    }
    this.live.stop();
    this.budget.hide();
    forgetSession();
    update((s) => {
      s.session = null;
      s.signInNotice = notice;
      clearUserData(s);
    });
  }

  private routeChanged(): void {
    const route = routeOf(window.location.hash);
    if (route.screen !== "job" || route.jobId !== getState().detail.jobId) {
      this.actions.stopFollowing();
    }
    update((s) => {
      s.route = route;
      if (route.screen !== "jobs") {
        s.submit.submitted = null;
      }
      if (route.screen === "job" && s.detail.jobId !== route.jobId) {
        s.detail = initialDetail(route.jobId);
      }
    });
    if (getState().session === null) {
      return;
    }
    if (route.screen === "jobs") {
      void this.actions.loadList();
    } else if (route.screen === "job") {
      void this.actions.loadJob(route.jobId);
    }
  }

  private buildChrome(): void {
    const links = [
      h("a", { href: "#/jobs", id: "nav-jobs" }, "My jobs"),
      h("a", { href: "#/submit", id: "nav-submit" }, "New job"),
    ];
    this.nav.replaceChildren(...links);
    const who = h("span", { id: "who" });
    const out = h("button", { type: "button", id: "sign-out" }, "Sign out");
    out.addEventListener("click", () => {
      this.live.stop();
      signOut(this.config.auth);
    });
    this.account.replaceChildren(who, out);
  }

  private render(state: State): void {
    const signedIn = state.session !== null;
    if (signedIn) {
      this.budget.follow(state.jobs);
    }
    this.nav.hidden = !signedIn;
    this.account.hidden = !signedIn;
    const who = document.getElementById("who");
    if (who !== null && state.session !== null) {
      const tenant = state.session.tenant;
      setText(who, tenant !== null ? `${state.session.username} (${tenant})` : state.session.username);
    }
    this.liveLine.hidden = !signedIn || state.live === "off";
    this.liveLine.dataset["mode"] = state.live;
    setText(
      this.liveLine,
      state.live === "live"
        ? "Live: updates arrive as they happen."
        : state.live === "polling"
          ? "Live updates unavailable: refreshing every few seconds."
          : "Connecting for live updates...",
    );
    for (const link of this.nav.querySelectorAll("a")) {
      const current = link.getAttribute("href") === `#/${state.route.screen === "submit" ? "submit" : "jobs"}`;
      if (current) {
        link.setAttribute("aria-current", "page");
      } else {
        link.removeAttribute("aria-current");
      }
    }
    const key = signedIn ? routeKey(state.route) : "signin";
    if (key !== this.screenKey) {
      this.screen?.unmount();
      this.screen = this.screenFor(state);
      this.screenKey = key;
      this.screen.mount(this.main);
    }
    this.screen?.render(state);
  }

  private screenFor(state: State): Screen {
    if (state.session === null) {
      return new SignInScreen(() => void beginSignIn(this.config.auth, window.location.hash || "#/jobs"));
    }
    switch (state.route.screen) {
      case "job":
        return new JobScreen(this.actions, state.route.jobId);
      case "submit":
        return new SubmitScreen(this.actions);
      default:
        return new JobsScreen(this.actions);
    }
  }
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = await loadConfig();
  } catch {
    element("main").replaceChildren(
      failureBox({ title: "The console is not configured", detail: "Its config.json is missing or incomplete." }),
    );
    return;
  }
  await new App(config).start();
}

void main();
