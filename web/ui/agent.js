/* What the viewer asks of the agent besides profiles. */

/* The agent's answer to a failed request: its sentence when it gave one. */
export async function answerText(resp) {
  let body = await resp.text();
  if ((resp.headers.get("Content-Type") || "").startsWith("application/json")) {
    try { body = JSON.parse(body).error || body; } catch (e) { /* keep the text */ }
  }
  return body.trim();
}

