// The ns-3 side of lowtide's simulator comparison (issue 26, BENCHMARKS.md):
// `lowtide sim stream --flows N --rate R --rtt T --duration D` built in ns-3 3.37.
// Two nodes joined by one full-duplex point-to-point link of rate R and one-way delay
// T/2; N TCP CUBIC bulk flows from node 0 to node 1 (BulkSendApplication to
// PacketSink), MSS 1448, SACK and timestamps on, 4 MB socket buffers, delayed ACKs
// every second segment; each device behind a 1000-packet pfifo (lowtide's default
// txqueuelen). Prints one JSON line: wire packets (every packet either device
// finished sending), bytes delivered, the simulated and the wall time.
//
// Build and run: scripts/bench-ns3.sh (g++ -O2 against Debian's libns3-dev).
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <cstdio>

using namespace ns3;

static uint64_t g_wire_packets = 0;

static void
PhyTxEnd(Ptr<const Packet>)
{
    ++g_wire_packets;
}

int
main(int argc, char* argv[])
{
    uint32_t flows = 1;
    std::string rate = "10Gbps";
    double rtt_ms = 1.0;
    double duration_s = 1.0;
    CommandLine cmd;
    cmd.AddValue("flows", "bulk flows", flows);
    cmd.AddValue("rate", "link rate (ns-3 DataRate)", rate);
    cmd.AddValue("rttMs", "round-trip time in ms", rtt_ms);
    cmd.AddValue("duration", "simulated seconds", duration_s);
    cmd.Parse(argc, argv);

    Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpCubic"));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(true));

    NodeContainer nodes;
    nodes.Create(2);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue(rate));
    p2p.SetChannelAttribute("Delay", TimeValue(MilliSeconds(rtt_ms / 2.0)));
    NetDeviceContainer devs = p2p.Install(nodes);
    InternetStackHelper stack;
    stack.Install(nodes);
    TrafficControlHelper tch;
    tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("1000p"));
    tch.Install(devs);
    Ipv4AddressHelper ip;
    ip.SetBase("10.0.0.0", "255.255.255.0");
    Ipv4InterfaceContainer ifs = ip.Assign(devs);

    const uint16_t port = 5001;
    PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer sinks = sink.Install(nodes.Get(1));
    sinks.Start(Seconds(0.0));
    for (uint32_t i = 0; i < flows; ++i)
    {
        BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(ifs.GetAddress(1), port));
        bulk.SetAttribute("MaxBytes", UintegerValue(0));
        bulk.SetAttribute("SendSize", UintegerValue(64 * 1024));
        ApplicationContainer a = bulk.Install(nodes.Get(0));
        a.Start(MicroSeconds(i)); // flows 1 us apart, as lowtide's
        a.Stop(Seconds(duration_s));
    }
    for (uint32_t d = 0; d < devs.GetN(); ++d)
    {
        devs.Get(d)->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&PhyTxEnd));
    }
    Simulator::Stop(Seconds(duration_s));
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t bytes = DynamicCast<PacketSink>(sinks.Get(0))->GetTotalRx();
    Simulator::Destroy();
    std::printf("{\"flows\": %u, \"wire_packets\": %llu, \"bytes\": %llu, \"sim_s\": %.3f, "
                "\"wall_s\": %.3f, \"goodput_bps\": %.0f}\n",
                flows,
                (unsigned long long)g_wire_packets,
                (unsigned long long)bytes,
                duration_s,
                wall,
                bytes * 8.0 / duration_s);
    return 0;
}
