// Unmodified JavaScript clients against the router: viem with JSON-RPC batching, and ethers.
// Usage: node js_clients.mjs RPC_URL ADDRESS; prints one JSON object with what each client saw.
import { createPublicClient, http } from "viem";
import { JsonRpcProvider } from "ethers";

const [url, address] = process.argv.slice(2);
const fetches = [];
const viem = createPublicClient({
  transport: http(url, {
    batch: true,
    onFetchResponse: (response) => {
      fetches.push({ status: response.status, batchId: response.headers.get("x-batch-id") });
    },
  }),
});
const [blockNumber, chainId, balance] = await Promise.all([
  viem.getBlockNumber(),
  viem.getChainId(),
  viem.getBalance({ address }),
]);
let unsupported = null;
try {
  await viem.request({ method: "debug_traceCall", params: [] });
} catch (error) {
  unsupported = { code: error.code ?? error.cause?.code ?? null, message: error.shortMessage };
}

const ethers = new JsonRpcProvider(url, undefined, { staticNetwork: false });
const [network, ethersBalance, ethersBlock] = await Promise.all([
  ethers.getNetwork(),
  ethers.getBalance(address),
  ethers.getBlockNumber(),
]);
ethers.destroy();

console.log(JSON.stringify({
  viem: { blockNumber: blockNumber.toString(), chainId, balance: balance.toString(), fetches, unsupported },
  ethers: { chainId: network.chainId.toString(), balance: ethersBalance.toString(), blockNumber: ethersBlock },
}));
