// HOOK (DESIGN.md, "Web console": budget left). GET /v1/budget -> {period, limitTokens, usedTokens,
// reservedTokens, remainingTokens, resetsAt} is being built in parallel and is not in
// docs/openapi.json yet. When it is: `make console-types` (the types then have the route), add
// `budget()` to api/client.ts, and fill in `renderBudget` below; index.html already has the slot
// (`#budget`, hidden) in the header, and the app calls this after every sign-in and job change.
import type { Api } from "./api/client";

export function renderBudget(_slot: HTMLElement, _api: Api): void {
  // Intentionally empty until the budget API exists; the slot stays hidden.
}
