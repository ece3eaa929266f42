// Unmodified JavaScript clients over the router's WebSocket: ethers' WebSocketProvider ("block"
// events, a call) and viem's webSocket transport (watchBlocks, watchEvent, a call).
// Usage: node js_ws_clients.mjs WS_URL TOPIC COUNT. Prints {"ready": true} once both listen,
// then, when each has seen COUNT blocks and one event with TOPIC, one JSON object.
import { WebSocketProvider } from "ethers";
import { createPublicClient, webSocket } from "viem";

const [url, topic, count] = process.argv.slice(2);
const wanted = Number(count);
const seen = { ethers: [], viem: [], viemLogs: [] };

const ethers = new WebSocketProvider(url);
const viem = createPublicClient({ transport: webSocket(url) });

const ethersBlock = await ethers.getBlockNumber();
const viemChain = await viem.getChainId();
await ethers.on("block", (number) => seen.ethers.push(number));
const stopBlocks = viem.watchBlocks({ onBlock: (block) => seen.viem.push(Number(block.number)) });
const stopLogs = viem.watchEvent({
  onLogs: (logs) => logs.forEach((log) => seen.viemLogs.push(log.topics[0])),
});
await new Promise((resolve) => setTimeout(resolve, 1000)); // both subscribed
console.log(JSON.stringify({ ready: true }));

const deadline = Date.now() + 30000;
while (
  (seen.ethers.length < wanted || seen.viem.length < wanted || !seen.viemLogs.includes(topic)) &&
  Date.now() < deadline
) {
  await new Promise((resolve) => setTimeout(resolve, 100));
}
stopBlocks();
stopLogs();
await ethers.destroy();
console.log(JSON.stringify({ ethersBlock, viemChain, ...seen }));
process.exit(0);
