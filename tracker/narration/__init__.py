"""The narrator: a report's prose written by a language model behind an OpenAI-compatible API (optional).
`schema`: what the model is sent and how its answer is checked (pure); `client`, `narrator`: the call;
`store`: the answers kept; `prose`: what a report reads of them; `jobs`: the narration job."""
