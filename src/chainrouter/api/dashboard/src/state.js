// What the page knows of the signed-in account and this installation.
export const state = {
  settings: null, // GET /dashboard/settings.json
  account: null, // GET /account
  chains: [], // GET /chains
  wsChains: [], // GET /chains/ws
  keys: [], // GET /api-keys
};

export function chainName(id) {
  const found = [...state.chains, ...state.wsChains].find((chain) => String(chain.chain_id) === String(id));
  return found ? `${found.name} (${id})` : `chain ${id}`;
}

export function keyName(key) {
  return key.name || key["X-Hint"] || key.key_hint;
}
