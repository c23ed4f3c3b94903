/* What the viewer asks of the agent besides profiles. */

/* The agent's answer to a failed request: its sentence when it gave one. */
export async function answerText(resp) {
  let body = await resp.text();
  if ((resp.headers.get("Content-Type") || "").startsWith("application/json")) {
    try { body = JSON.parse(body).error || body; } catch (e) { /* keep the text */ }
  }
  return body.trim();
}

/* The agent's status (../status) as JSON, or null when it cannot be had
 * (an old or unreachable agent). */
export async function agentStatus() {
  try {
    const r = await fetch("../status", { cache: "no-store" });
    return r.ok ? await r.json() : null;
  } catch (e) {
    return null;
  }
}
