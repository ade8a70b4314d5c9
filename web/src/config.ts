// The console's configuration: config.json beside index.html, written by each deployment
// (BucketDeployment in AWS, the local console front in local mode). Nothing else differs.

export interface AuthConfig {
  /** The user pool's issuer: `iss` of its ID tokens. */
  issuer: string;
  authorizeEndpoint: string;
  tokenEndpoint: string;
  logoutEndpoint: string;
  clientId: string;
  /** Where the user pool sends the browser back to, with `?code=` (the console's own URL). */
  redirectUri: string;
  scopes: string[];
}

export interface Config {
  /** The HTTP API's base URL; the WebSocket URL comes from each ticket. */
  apiUrl: string;
  auth: AuthConfig;
}

function text(value: unknown, name: string): string {
  if (typeof value !== "string" || value === "") {
    throw new Error(`config.json: ${name} is missing`);
  }
  return value;
}

/** Reads and checks config.json; a broken one is a deployment fault, shown as such. */
export async function loadConfig(): Promise<Config> {
  const response = await fetch(new URL("config.json", document.baseURI), { cache: "no-store" });
  if (!response.ok) {
    throw new Error(`config.json could not be read (HTTP ${response.status})`);
  }
  const raw = (await response.json()) as Record<string, unknown>;
  const auth = (raw["auth"] ?? {}) as Record<string, unknown>;
  const scopes = Array.isArray(auth["scopes"]) ? auth["scopes"].map(String) : ["openid"];
  return {
    apiUrl: text(raw["apiUrl"], "apiUrl").replace(/\/+$/, ""),
    auth: {
      issuer: text(auth["issuer"], "auth.issuer"),
      authorizeEndpoint: text(auth["authorizeEndpoint"], "auth.authorizeEndpoint"),
      tokenEndpoint: text(auth["tokenEndpoint"], "auth.tokenEndpoint"),
      logoutEndpoint: text(auth["logoutEndpoint"], "auth.logoutEndpoint"),
      clientId: text(auth["clientId"], "auth.clientId"),
      redirectUri: text(auth["redirectUri"], "auth.redirectUri"),
      scopes,
    },
  };
}
