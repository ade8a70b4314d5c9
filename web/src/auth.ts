// Sign-in: OAuth 2.0 authorization code with PKCE (RFC 7636), the same code against Cognito's
// managed login in AWS and against the local front's /oauth2/authorize and /oauth2/token in local
// mode. oauth4webapi makes the verifier, the challenge and the state, exchanges the code and checks
// the token response and the ID token's claims (issuer, audience, expiry).
//
// Tokens live in sessionStorage (this tab only, gone when it closes), never in localStorage; only
// the ID token is kept: it is the API's bearer token. No refresh token is kept: when the ID token
// expires, the user signs in again.
import * as oauth from "oauth4webapi";
import type { AuthConfig } from "./config";

const SESSION_KEY = "outlast.session";
const PENDING_KEY = "outlast.signin";

export interface Session {
  idToken: string;
  /** Seconds since the epoch, from the token's `exp`. */
  expiresAt: number;
  username: string;
  tenant: string | null;
}

interface Pending {
  state: string;
  codeVerifier: string;
  /** Where to go after signing in (a hash route). */
  returnTo: string;
}

function server(config: AuthConfig): oauth.AuthorizationServer {
  return {
    issuer: config.issuer,
    authorization_endpoint: config.authorizeEndpoint,
    token_endpoint: config.tokenEndpoint,
    end_session_endpoint: config.logoutEndpoint,
  };
}

function client(config: AuthConfig): oauth.Client {
  return { client_id: config.clientId };
}

/** Plain http is allowed for the local front on this machine only; every other endpoint is https. */
function loopback(url: string): boolean {
  const parsed = new URL(url);
  return parsed.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(parsed.hostname);
}

function claimsOf(token: string): Record<string, unknown> {
  const payload = token.split(".")[1] ?? "";
  const json = atob(payload.replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = Uint8Array.from(json, (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
}

function sessionFrom(idToken: string): Session {
  const claims = claimsOf(idToken);
  const tenant = claims["custom:tenant"];
  return {
    idToken,
    expiresAt: Number(claims["exp"] ?? 0),
    username: String(claims["cognito:username"] ?? claims["email"] ?? claims["sub"] ?? ""),
    tenant: typeof tenant === "string" ? tenant : null,
  };
}

export function isExpired(session: Session, now: number = Date.now() / 1000): boolean {
  return session.expiresAt <= now;
}

/** The session kept in this tab, or null (none, unreadable or expired). */
export function storedSession(): Session | null {
  const raw = sessionStorage.getItem(SESSION_KEY);
  if (raw === null) {
    return null;
  }
  try {
    const session = sessionFrom(String(JSON.parse(raw)));
    return session;
  } catch {
    sessionStorage.removeItem(SESSION_KEY);
    return null;
  }
}

export function forgetSession(): void {
  sessionStorage.removeItem(SESSION_KEY);
}

/** Goes to the user pool's sign-in page; it comes back to redirectUri with a code. */
export async function beginSignIn(config: AuthConfig, returnTo: string): Promise<void> {
  const codeVerifier = oauth.generateRandomCodeVerifier();
  const pending: Pending = { state: oauth.generateRandomState(), codeVerifier, returnTo };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(config.authorizeEndpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", config.clientId);
  url.searchParams.set("redirect_uri", config.redirectUri);
  url.searchParams.set("scope", config.scopes.join(" "));
  url.searchParams.set("state", pending.state);
  url.searchParams.set("code_challenge", await oauth.calculatePKCECodeChallenge(codeVerifier));
  url.searchParams.set("code_challenge_method", "S256");
  window.location.assign(url.href);
}

/** True when this page load is the user pool's redirect back (a `code` or an `error` in the query). */
export function isSignInCallback(location: Location): boolean {
  const query = new URLSearchParams(location.search);
  return query.has("state") && (query.has("code") || query.has("error"));
}

export class SignInError extends Error {}

/** Exchanges the code for tokens; returns the session and the route to go back to. */
export async function completeSignIn(
  config: AuthConfig,
  location: Location,
): Promise<{ session: Session; returnTo: string }> {
  const raw = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  if (raw === null) {
    throw new SignInError("This sign-in was not started here, or was already used. Sign in again.");
  }
  const pending = JSON.parse(raw) as Pending;
  const as = server(config);
  const me = client(config);
  let parameters: URLSearchParams;
  try {
    parameters = oauth.validateAuthResponse(as, me, new URL(location.href), pending.state);
  } catch {
    throw new SignInError("The sign-in did not complete. Sign in again.");
  }
  const insecure = loopback(config.tokenEndpoint);
  let result: oauth.TokenEndpointResponse;
  try {
    const response = await oauth.authorizationCodeGrantRequest(
      as,
      me,
      oauth.None(),
      parameters,
      config.redirectUri,
      pending.codeVerifier,
      { [oauth.allowInsecureRequests]: insecure },
    );
    result = await oauth.processAuthorizationCodeResponse(as, me, response, { requireIdToken: true });
  } catch {
    throw new SignInError("The user pool did not accept this sign-in. Sign in again.");
  }
  const idToken = result.id_token;
  if (idToken === undefined) {
    throw new SignInError("The user pool sent no ID token. Sign in again.");
  }
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(idToken));
  return { session: sessionFrom(idToken), returnTo: pending.returnTo };
}

/** Forgets the tokens here, then ends the user pool's own session (its sign-in cookie). */
export function signOut(config: AuthConfig): void {
  forgetSession();
  const url = new URL(config.logoutEndpoint);
  url.searchParams.set("client_id", config.clientId);
  url.searchParams.set("logout_uri", config.redirectUri);
  window.location.assign(url.href);
}
